// A stand-in for PyTorch's header of this name, written for memsnap's tests:
// only the declarations torch/memsnap_torch.cpp uses, with PyTorch 2.11's
// names and types, so that the plugin's PyTorch path compiles (and warns)
// on a machine without PyTorch (tests/torch/CMakeLists.txt, plugin-stub).
// Nothing here is run; the plugin is built for real by build_plugin.py.
#pragma once
#include <cstdint>
namespace at::sequence_number { uint64_t peek(); }
