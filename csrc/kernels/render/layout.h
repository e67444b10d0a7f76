// flycuda: the tile renderer's data layout: the columns of every packed scene
// array and the limits the host checks against. flycuda/ops/scene_layout.py mirrors these
// names (tests/render/test_render_layout.py holds the two equal).
#pragma once

#include "kernels/platform.h"

#include <climits>
#include <cstdint>

namespace flycuda {
namespace render {

// Geom types: MuJoCo's mjtGeom numbering (heightfields are packed as meshes).
enum GeomType : int32_t { kPlane = 0, kSphere = 2, kCapsule = 3, kEllipsoid = 4, kCylinder = 5,
                          kBox = 6, kMesh = 7 };

// geom_info int32 [Gr, kInfoCols]: geom type, root node of its mesh BVH (-1: not a mesh).
constexpr int kInfoCols = 2, kInfoType = 0, kInfoRoot = 1;
// geom_param float32 [Gr, kParamCols]: size, colour, second (checker) colour, checker
// cell size (0: plain), bounding radius (0: unbounded, e.g. a plane), padding.
constexpr int kParamCols = 12, kParamSize = 0, kParamRgb = 3, kParamRgb2 = 6, kParamChecker = 9,
              kParamRbound = 10;
// lights float32 [L, kLightCols]: unit direction, ambient, diffuse, casts shadows (0/1).
constexpr int kLightCols = 10, kLightDir = 0, kLightAmbient = 3, kLightDiffuse = 6, kLightShadow = 9;
// headlight float32 [kHeadlightCols]: ambient, diffuse.
constexpr int kHeadlightCols = 6;
// background float32 [kBackgroundCols]: the colour of rays that hit nothing, looking
// straight up and straight down (the model's skybox; blended by the ray's elevation).
constexpr int kBackgroundCols = 6;

// BVH nodes (the meshes' and the per-world top level): each node holds the boxes
// of BOTH its children, boxes float32 [N, kBoxCols] = child a (lo xyz, hi xyz),
// child c (lo xyz, hi xyz) (three float4 loads), and links int32 [N, 2]: per child,
// an internal node (>= 0, always after its parent) or a leaf ~(first << kLeafBits | count):
// items [first, first + count) (triangles, or one render-list geom at the top level);
// count 0 is an empty child (its box is empty: no ray enters it).
constexpr int kBoxCols = 12;
constexpr int kLeafBits = 3;
constexpr int32_t kLeafMaxCount = (1 << kLeafBits) - 1;
// Triangles float32 [T, kTriCols]: v0, e1 = v1 - v0, e2 = v2 - v0, each padded to a float4.
constexpr int kTriCols = 12;

// Traversal: one int32 stack for both levels (a mesh entered from the top level
// pushes a marker, popped to return to the world frame). Every BVH is checked on
// the host: depth(top level) + 1 + depth(any mesh) <= kStack, where depth counts the
// internal nodes on a root-to-leaf path (each pushes at most one entry).
constexpr int kStack = 40;
// The stack entry "back to the world frame": INT32_MIN, which no leaf link takes (items
// and nodes are fewer than 2^28 - 1, checked on the host), unlike an empty child ~0 = -1.
constexpr int32_t kMarker = INT32_MIN;
constexpr int32_t kMaxVisits = 1 << 22;  // stack pops one ray may make: bounds a walk of a bad BVH
constexpr int kMaxCams = 8;              // cameras per world in one launch
constexpr int kMaxLights = 32;           // lights (the shadow mask's bits)

constexpr float kEps = 1e-6f;  // smallest accepted ray distance
constexpr float kInf = 3.0e38f;

FLYCUDA_HOST_DEVICE inline bool is_leaf(int32_t link) { return link < 0; }
FLYCUDA_HOST_DEVICE inline int32_t leaf_first(int32_t link) { return (~link) >> kLeafBits; }
FLYCUDA_HOST_DEVICE inline int32_t leaf_count(int32_t link) { return (~link) & kLeafMaxCount; }
FLYCUDA_HOST_DEVICE inline int32_t make_leaf(int32_t first, int32_t count) {
  return ~((first << kLeafBits) | count);
}


// One launch's arguments, built once from the op's tensors (csrc/render/render_args.cpp;
// the emulator's driver fills the same struct) and passed by value to the kernels.
// Scene: the static scene and the per-world geom poses.
struct Scene {
  const float* xpos;  // [W, G, 3] rows strided by xpos_s0 / xpos_s1
  const float* xmat;  // [W, G, 9]
  int64_t xpos_s0, xpos_s1, xmat_s0, xmat_s1;
  int32_t nworld;
  int32_t ngeom;                // Gr: the render list
  const int32_t* geom_ids;      // [Gr] MuJoCo geom id
  const int32_t* geom_info;     // [Gr, kInfoCols]
  const float* geom_param;      // [Gr, kParamCols]
  const float* bvh_boxes;       // [N, kBoxCols] the meshes' BVH nodes
  const int32_t* bvh_links;     // [N, 2]
  const float* tris;            // [T, kTriCols]
  const int32_t* top_links;     // [Nt, 2] the top level's topology (leaves: one render-list geom)
  const int32_t* unbounded;     // [U] render-list geoms outside the top level (planes)
  const float* lights;          // [L, kLightCols]
  const float* headlight;       // [kHeadlightCols]
  const float* background;      // [kBackgroundCols]
  int32_t nnode, ntri, ntop, nunbounded, nlight;
};

// View: which worlds, cameras and pixels; the outputs.
struct View {
  const int32_t* worlds;  // [S]
  int32_t nsel;           // S
  int32_t ncam;           // C
  const float* cam_pos;   // [W, C, 3] strided
  const float* cam_mat;   // [W, C, 9] strided
  int64_t cp_s0, cp_s1, cm_s0, cm_s1;
  float tan_half_fovy[kMaxCams];
  int32_t height, width;
  const int32_t* pixels;  // [P] pixel ids (py * width + px) to cast, or null: every pixel
  int32_t npix;           // P (0: every pixel)
  float zfar;             // planar far plane, 0: none
  int32_t samples;        // n x n rays per pixel
  bool shadows;
  uint8_t* rgb;           // tiles [S, C, H, Wd, 3] (list: [S, C, P, 3]) or mosaic; null: none
  int32_t mosaic_cols;    // 0: tiles
  float* depth;           // [S, C, H, Wd] ([S, C, P]) or null
  int32_t* seg;           // likewise
  float* top_boxes;       // [S, Nt, kBoxCols] workspace: each selected world's refit top level
  int64_t* timers;        // [blocks, kTimers] or null
};

struct RenderArgs {
  Scene sc;
  View v;
};

}  // namespace render
}  // namespace flycuda
