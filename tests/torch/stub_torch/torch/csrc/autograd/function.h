// A stand-in for PyTorch's header of this name, written for memsnap's tests:
// only the declarations torch/memsnap_torch.cpp uses, with PyTorch 2.11's
// names and types, so that the plugin's PyTorch path compiles (and warns)
// on a machine without PyTorch (tests/torch/CMakeLists.txt, plugin-stub).
// Nothing here is run; the plugin is built for real by build_plugin.py.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
namespace torch::autograd {
struct Node { virtual ~Node() = default; uint64_t sequence_nr() const { return 0; } virtual std::string name() const { return ""; } };
std::shared_ptr<Node> get_current_node();
}
