"""Helpers the tests share (not tests themselves): devices, cases, worlds, images, retinas, the
emulator's harness. Tests import them from here, never from one another."""
