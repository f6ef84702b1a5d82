// A stand-in for PyTorch's header of this name, written for memsnap's tests:
// only the declarations torch/memsnap_torch.cpp uses, with PyTorch 2.11's
// names and types, so that the plugin's PyTorch path compiles (and warns)
// on a machine without PyTorch (tests/torch/CMakeLists.txt, plugin-stub).
// Nothing here is run; the plugin is built for real by build_plugin.py.
#pragma once
#include <cstdint>
#include <memory>
#include <string_view>
namespace c10::monitor {
namespace detail {
struct GaugeBackendIf { virtual ~GaugeBackendIf() = default; virtual void record(int64_t) noexcept = 0; };
struct GaugeBackendFactoryIf { virtual ~GaugeBackendFactoryIf() = default; virtual std::unique_ptr<GaugeBackendIf> create(std::string_view key) noexcept = 0; };
void registerGaugeBackend(std::unique_ptr<GaugeBackendFactoryIf>);
}
struct GaugeHandle { explicit GaugeHandle(std::string_view); };
}
