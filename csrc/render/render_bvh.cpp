// flycuda: render_tiles' index-value checks: the selection, the geoms, the pixel
// list, and every BVH (the meshes' and the top level): links, leaves, and depth
// against the traversal stack, so that no push is ever dropped (a silent hole).
#include "render/render_tiles.h"

#include "common.h"

#include <algorithm>
#include <map>
#include <vector>

namespace flycuda {
namespace {

constexpr const char* kOpName = "render_tiles";

// Walks the tree at `root` of links [N, 2] (nodes after their parents; leaves of at most
// kLeafMaxCount items within [0, items)); returns its depth (internal nodes on the
// longest root-to-leaf path). `seen` marks the nodes reached: a node reached twice
// is not a tree. `what` names the tree in errors.
int64_t walk_tree(const int32_t* links, int64_t N, int32_t root, int64_t items, bool one_item_leaves,
                  std::vector<char>& seen, const std::string& what, const char* arg) {
  int64_t deepest = 0;
  std::vector<std::pair<int32_t, int64_t>> todo = {{root, 1}};
  while (!todo.empty()) {
    const auto [n, depth] = todo.back();
    todo.pop_back();
    FLYCUDA_CHECK(!seen[n], "argument '", arg, "': node ", n, " of ", what, " is reached twice (not a tree)");
    seen[n] = 1;
    deepest = std::max(deepest, depth);
    for (int i = 0; i < 2; ++i) {
      const int32_t link = links[2 * n + i];
      if (render::is_leaf(link)) {
        const int64_t first = render::leaf_first(link), count = render::leaf_count(link);
        // count 0: an empty child (its box is empty: no ray enters it).
        const bool ok = count == 0 || (one_item_leaves ? (count == 1 && first < items) : (first + count <= items));
        FLYCUDA_CHECK(ok, "argument '", arg, "': node ", n, " of ", what, " has a leaf of items [", first, ", ",
                      first + count, "), expected ", one_item_leaves ? "one item" : "items", " within [0, ", items,
                      ")");
      } else {
        FLYCUDA_CHECK(link > n && link < N, "argument '", arg, "': node ", n, " of ", what, " links to node ", link,
                      ", expected a later node in (", n, ", ", N, ")");
        todo.push_back({link, depth + 1});
      }
    }
  }
  return deepest;
}

// The top level: node 0 the root of one tree over all Nt nodes; each bounded geom in
// exactly one leaf, each unbounded one listed once in `unbounded`. Returns its depth.
int64_t check_top_level(const HostValues& param, const HostValues& top, const HostValues& unb) {
  const int64_t Gr = param.size(0), Nt = top.size(0);
  const float* pp = param.data<float>();
  std::vector<char> seen(Nt, 0);
  const int64_t depth = Nt > 0 ? walk_tree(top.data<int32_t>(), Nt, 0, Gr, true, seen, "the top level",
                                           "top_links") : 0;
  for (int64_t n = 0; n < Nt; ++n) {
    FLYCUDA_CHECK(seen[n], "argument 'top_links': node ", n, " is not reached from the root (not one tree)");
  }
  std::vector<int64_t> leaves(Gr, 0), planes(Gr, 0);
  const int32_t* tx = top.data<int32_t>();
  for (int64_t i = 0; i < 2 * Nt; ++i) {
    if (render::is_leaf(tx[i]) && render::leaf_count(tx[i]) > 0) ++leaves[render::leaf_first(tx[i])];
  }
  const int32_t* ux = unb.data<int32_t>();
  for (int64_t u = 0; u < unb.numel(); ++u) {
    FLYCUDA_CHECK(ux[u] >= 0 && ux[u] < Gr, "argument 'unbounded' entry ", u, " = ", ux[u], " is outside [0, ", Gr,
                  ")");
    ++planes[ux[u]];
  }
  for (int64_t k = 0; k < Gr; ++k) {
    const bool bounded = pp[render::kParamCols * k + render::kParamRbound] > 0.f;
    FLYCUDA_CHECK(leaves[k] == (bounded ? 1 : 0) && planes[k] == (bounded ? 0 : 1), "render-list geom ", k,
                  (bounded ? " (bounded: rbound > 0)" : " (unbounded: rbound <= 0)"), " must appear once, in ",
                  (bounded ? "a 'top_links' leaf" : "'unbounded'"), ", got ", leaves[k], " leaves and ", planes[k],
                  " 'unbounded' entries");
  }
  return depth;
}

}  // namespace

void check_render_values(const Tensor& geom_xpos, const Tensor& worlds, const TensorList& scene,
                         const Tensor& pixels, int64_t height, int64_t width, const CopyToHost& copy) {
  const HostValues ids(scene[kGeomIds], copy), info(scene[kGeomInfo], copy), links(scene[kBvhLinks], copy);
  check_index_values(kOpName, "worlds", HostValues(worlds, copy), geom_xpos.size(0), "W = geom_xpos.size(0)",
                     false, render::kSkipImage);
  check_index_values(kOpName, "scene.geom_ids", ids, geom_xpos.size(1), "G = geom_xpos.size(1)", false);
  if (pixels.numel()) {
    check_index_values(kOpName, "pixels", HostValues(pixels, copy), height * width, "height * width", false);
  }
  const int64_t N = links.size(0), T = scene[kTris].size(0);
  const int32_t* gi = info.data<int32_t>();
  const int32_t* lx = links.data<int32_t>();
  // Each mesh's BVH (a root shared by several geoms is walked once).
  std::map<int32_t, int64_t> mesh_depth;
  std::vector<char> seen(N, 0);
  int64_t deepest = 0, deepest_k = -1;
  for (int64_t k = 0; k < info.size(0); ++k) {
    const int32_t type = gi[render::kInfoCols * k + render::kInfoType];
    const int32_t root = gi[render::kInfoCols * k + render::kInfoRoot];
    const bool known = type == render::kPlane || (type >= render::kSphere && type <= render::kMesh);
    FLYCUDA_CHECK(known, "scene field 'geom_info' row ", k, " has geom type ", type, ", which the renderer does not draw");
    FLYCUDA_CHECK(type == render::kMesh ? (root >= 0 && root < N) : root == -1, "scene field 'geom_info' row ", k,
                  " has BVH root ", root, ", expected ", type == render::kMesh ? "a node in [0, N)" : "-1 (not a mesh)",
                  " with N = ", N);
    if (type != render::kMesh) continue;
    auto it = mesh_depth.find(root);
    if (it == mesh_depth.end()) {
      const std::string what = "the mesh BVH at node " + std::to_string(root) + " (render-list geom " +
                               std::to_string(k) + ")";
      it = mesh_depth.emplace(root, walk_tree(lx, N, root, T, false, seen, what, "bvh_links")).first;
    }
    if (it->second > deepest) deepest = it->second, deepest_k = k;
  }
  const int64_t top_depth = check_top_level(HostValues(scene[kGeomParam], copy), HostValues(scene[kTopLinks], copy),
                                            HostValues(scene[kUnbounded], copy));
  FLYCUDA_CHECK(top_depth + 1 + deepest <= render::kStack, "the mesh of render-list geom ", deepest_k, " (geom id ",
                deepest_k >= 0 ? ids.data<int32_t>()[deepest_k] : -1, ") has a BVH of depth ", deepest,
                " and the top level one of depth ", top_depth, ": a ray would need ", top_depth + 1 + deepest,
                " stack entries, more than the traversal's ", render::kStack,
                " (rebuild the scene with flycuda.render.pack_scene, whose BVHs are depth-limited)");
}

}  // namespace flycuda
