// cudnn_attention through cuDNN's graph API (its C++ frontend): one forward and one backward graph per
// shape, built once; each call fills the tensors' addresses and runs the chosen plan on the stream.
#include "cudnn_attention.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <exception>
#include <iterator>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fp8/error.hpp>

#ifdef FP8_TRAINER_CUDNN
#include <cudnn_frontend.h>

#include "device_buffer.hpp"
#endif

namespace trainer::cuda {

#ifdef FP8_TRAINER_CUDNN

namespace {

namespace fe = cudnn_frontend;
using uid = fe::graph::Tensor_attributes::uid_t;

// The tensors' identities in both graphs' variant packs.
enum : uid { q_uid = 1, k_uid, v_uid, o_uid, stats_uid, d_o_uid, dq_uid, dk_uid, dv_uid };

void check_cudnn(cudnnStatus_t status, const char* call) {
  if (status != CUDNN_STATUS_SUCCESS) {
    throw fp8::error(std::string("trainer::cuda::cudnn_attention: ") + call +
                     " failed: " + cudnnGetErrorString(status));
  }
}

// Throws naming the stage and cuDNN's message when a frontend call fails.
void check_frontend(fe::error_t status, const char* stage, const attention_shape& s) {
  if (status.is_good()) return;
  throw fp8::error("trainer::cuda::cudnn_attention: " + std::string(stage) + " failed for B " +
                   std::to_string(s.batch) + ", H " + std::to_string(s.heads) + ", T " +
                   std::to_string(s.context) + ", D " + std::to_string(s.head_dim()) + " (cuDNN " +
                   std::to_string(cudnnGetVersion()) + "): " + status.get_message());
}

// Which rows a [B, H, T, D] tensor lives in: q, k, v and their gradients in the QKV projection's
// [B, T, 3C] rows (one of the three C-wide thirds), o and dO in [B, T, C] rows.
enum class token_rows { qkv, heads };

// A [B, H, T, D] tensor read from (or written into) token rows: head h of token t starts at column
// h * D of row t; D is contiguous.
fe::graph::Tensor_attributes heads_tensor(const char* name, uid id, const attention_shape& s,
                                          token_rows rows) {
  const std::int64_t B = s.batch, H = s.heads, T = s.context, D = s.head_dim();
  const std::int64_t row = rows == token_rows::qkv ? 3 * std::int64_t(s.channels) : std::int64_t(s.channels);
  return fe::graph::Tensor_attributes()
      .set_name(name)
      .set_uid(id)
      .set_dim({B, H, T, D})
      .set_stride({T * row, D, row, 1});
}

// The statistics: [B, H, T, 1] FP32.
fe::graph::Tensor_attributes stats_tensor(const attention_shape& s) {
  const std::int64_t B = s.batch, H = s.heads, T = s.context;
  return fe::graph::Tensor_attributes()
      .set_name("stats")
      .set_uid(stats_uid)
      .set_dim({B, H, T, 1})
      .set_stride({H * T, T, 1, 1})
      .set_data_type(fe::DataType_t::FLOAT);
}

// o: the forward's output and the backward's input, [B, H, T, D] in [B, T, C] rows.
fe::graph::Tensor_attributes o_tensor(const attention_shape& s) {
  return heads_tensor("o", o_uid, s, token_rows::heads);
}

// q, k, v and their gradients dq, dk, dv: [B, H, T, D] in the three thirds of the QKV projection's
// [B, T, 3C] rows (which third is the address the variant pack gives; the layout is the same).
struct named_uid {
  const char* name;
  uid id;
};
constexpr named_uid qkv_names[3] = {{"q", q_uid}, {"k", k_uid}, {"v", v_uid}};
constexpr named_uid qkv_gradient_names[3] = {{"dq", dq_uid}, {"dk", dk_uid}, {"dv", dv_uid}};

using tensor_ptr = std::shared_ptr<fe::graph::Tensor_attributes>;

// q, k and v as inputs of `graph`.
std::array<tensor_ptr, 3> qkv_inputs(fe::graph::Graph& graph, const attention_shape& s) {
  std::array<tensor_ptr, 3> out;
  for (std::size_t i = 0; i < 3; ++i) {
    out[i] = graph.tensor(heads_tensor(qkv_names[i].name, qkv_names[i].id, s, token_rows::qkv));
  }
  return out;
}

// Makes a node's result an output of the graph with `layout`'s uid, dims and strides (and its data
// type, where the layout sets one).
void make_output(fe::graph::Tensor_attributes& result, const fe::graph::Tensor_attributes& layout) {
  result.set_output(true).set_uid(layout.get_uid()).set_dim(layout.get_dim()).set_stride(layout.get_stride());
  if (layout.get_data_type() != fe::DataType_t::NOT_SET) result.set_data_type(layout.get_data_type());
}

// A device description, for lowering graphs without a device (null: the current device's).
using device_description = std::shared_ptr<const fe::DeviceProperties>;

// BF16 inputs and outputs, FP32 everywhere inside (scores, softmax, accumulation). With a description
// (of an sm_90 device), before any node is added: the nodes take the graph's context as they are made.
std::shared_ptr<fe::graph::Graph> new_graph(const device_description& device) {
  auto graph = std::make_shared<fe::graph::Graph>();
  if (device != nullptr) graph->set_device_properties(device).set_sm_version(90);
  graph->set_io_data_type(fe::DataType_t::BFLOAT16)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  return graph;
}

// The uids of each graph's variant pack, in the order forward() and backward() give the addresses.
constexpr uid forward_pack_uids[] = {q_uid, k_uid, v_uid, o_uid, stats_uid};
constexpr uid backward_pack_uids[] = {q_uid, k_uid, v_uid, o_uid, d_o_uid, stats_uid, dq_uid, dk_uid, dv_uid};

template <std::size_t N>
std::unordered_map<uid, void*> variant_pack(const uid (&ids)[N],
                                            const std::array<const void*, N>& addresses) {
  std::unordered_map<uid, void*> pack;
  // cuDNN's variant pack takes non-const addresses; the inputs among them are only read.
  for (std::size_t i = 0; i < N; ++i) pack.emplace(ids[i], const_cast<void*>(addresses[i]));
  return pack;
}

// What the address a variant pack gives for `id` points at (cudnn_attention.hpp's layouts).
fe::graph::Tensor_attributes pack_layout(uid id, const attention_shape& s) {
  if (id == stats_uid) return stats_tensor(s);
  const token_rows rows = id == o_uid || id == d_o_uid ? token_rows::heads : token_rows::qkv;
  return heads_tensor("", id, s, rows).set_data_type(fe::DataType_t::BFLOAT16);
}

// A tensor's (dim, stride) pairs in one order: the same memory layout whatever the order of the
// axes (lowering the forward graph turns k into the [B, H, D, T] view of the same elements).
std::vector<std::pair<std::int64_t, std::int64_t>> axes(const fe::graph::Tensor_attributes& t) {
  const std::vector<std::int64_t> dims = t.get_dim(), strides = t.get_stride();
  std::vector<std::pair<std::int64_t, std::int64_t>> pairs;
  for (std::size_t i = 0; i < dims.size() && i < strides.size(); ++i) pairs.emplace_back(dims[i], strides[i]);
  if (dims.size() != strides.size()) pairs.emplace_back(-1, -1);  // never a layout's
  std::sort(pairs.begin(), pairs.end());
  return pairs;
}

// "" where the graph's inputs and outputs (`tensors`, after the graph is lowered) are exactly the
// tensors of the variant pack `ids`, each with the memory layout (dims and strides, in any order of
// the axes) and the data type of what the pack's address points at; else the first difference.
// cuDNN's validation accepts a graph whose tensors differ from the pack; a GPU would then fail to
// execute it, or read and write the tensors in the wrong layout.
template <std::size_t N>
std::string pack_error(const std::vector<tensor_ptr>& tensors, const uid (&ids)[N],
                       const attention_shape& s) {
  if (tensors.size() != N) {
    return std::to_string(tensors.size()) + " tensors for a pack of " + std::to_string(N) + " addresses";
  }
  std::vector<bool> matched(N, false);
  for (const tensor_ptr& t : tensors) {
    const std::string name = "tensor '" + t->get_name() + "' (uid " + std::to_string(t->get_uid()) + ")";
    const auto at = std::find(std::begin(ids), std::end(ids), t->get_uid());
    if (at == std::end(ids)) return name + " has no address in the pack";
    const std::size_t i = std::size_t(at - std::begin(ids));
    if (matched[i]) return name + ": a second tensor with this uid";
    matched[i] = true;
    const fe::graph::Tensor_attributes expected = pack_layout(ids[i], s);
    if (axes(*t) != axes(expected)) return name + ": dims and strides differ from the pack's layout";
    if (t->get_data_type() != expected.get_data_type()) return name + ": data type differs from the pack's";
  }
  return {};
}

float attention_scale(const attention_shape& s) { return 1.0f / std::sqrt(float(s.head_dim())); }

// The forward graph of `shape`, not yet built: o and the row statistics from q, k, v.
// `tensors` (where given) receives the graph's inputs and outputs, for pack_error.
std::shared_ptr<fe::graph::Graph> forward_graph(const attention_shape& shape,
                                                const device_description& device = nullptr,
                                                std::vector<tensor_ptr>* tensors = nullptr) {
  auto graph = new_graph(device);
  const auto [q, k, v] = qkv_inputs(*graph, shape);
  auto options = fe::graph::SDPA_attributes()
                     .set_name("causal_attention")
                     .set_generate_stats(true)
                     .set_causal_mask(true)
                     .set_attn_scale(attention_scale(shape));
  auto [o, stats] = graph->sdpa(q, k, v, options);
  make_output(*o, o_tensor(shape));
  make_output(*stats, stats_tensor(shape));
  if (tensors != nullptr) *tensors = {q, k, v, o, stats};
  return graph;
}

// The backward graph of `shape`, not yet built: dq, dk, dv from q, k, v, o, dO and the statistics.
// `tensors` (where given) receives the graph's inputs and outputs, for pack_error.
std::shared_ptr<fe::graph::Graph> backward_graph(const attention_shape& shape,
                                                 const device_description& device = nullptr,
                                                 std::vector<tensor_ptr>* tensors = nullptr) {
  auto graph = new_graph(device);
  const auto [q, k, v] = qkv_inputs(*graph, shape);
  auto o = graph->tensor(o_tensor(shape));
  auto d_o = graph->tensor(heads_tensor("d_o", d_o_uid, shape, token_rows::heads));
  auto stats = graph->tensor(stats_tensor(shape));
  // Deterministic: resumed and data-parallel runs must repeat their gradients bit for bit.
  auto options = fe::graph::SDPA_backward_attributes()
                     .set_name("causal_attention_backward")
                     .set_causal_mask(true)
                     .set_attn_scale(attention_scale(shape))
                     .set_deterministic_algorithm(true);
  const auto [dq, dk, dv] = graph->sdpa_backward(q, k, v, o, d_o, stats, options);
  const tensor_ptr gradients[3] = {dq, dk, dv};
  for (std::size_t i = 0; i < 3; ++i) {
    const named_uid& g = qkv_gradient_names[i];
    make_output(*gradients[i], heads_tensor(g.name, g.id, shape, token_rows::qkv));
  }
  if (tensors != nullptr) *tensors = {q, k, v, o, d_o, stats, dq, dk, dv};
  return graph;
}

// Validates the graph, lowers it, and builds the first plan of cuDNN's heuristics that supports it.
void build(fe::graph::Graph& graph, cudnnHandle_t handle, const attention_shape& s, const char* which) {
  const std::string prefix = std::string(which) + " graph: ";
  check_frontend(graph.validate(), (prefix + "validate").c_str(), s);
  check_frontend(graph.build_operation_graph(handle), (prefix + "build_operation_graph").c_str(), s);
  check_frontend(graph.create_execution_plans({fe::HeurMode_t::A}),
                 (prefix + "create_execution_plans").c_str(), s);
  check_frontend(graph.check_support(handle), (prefix + "check_support").c_str(), s);
  check_frontend(graph.build_plans(handle), (prefix + "build_plans").c_str(), s);
}

}  // namespace

struct cudnn_attention::graphs {
  attention_shape shape;
  cudnnHandle_t handle = nullptr;
  std::shared_ptr<fe::graph::Graph> forward, backward;
  device_buffer<std::uint8_t> workspace;

  explicit graphs(const attention_shape& s) : shape(s) {
    check_cudnn(cudnnCreate(&handle), "cudnnCreate");
    try {
      forward = forward_graph(shape);
      build(*forward, handle, shape, "forward");
      backward = backward_graph(shape);
      build(*backward, handle, shape, "backward");
      std::int64_t forward_bytes = 0, backward_bytes = 0;
      check_frontend(forward->get_workspace_size(forward_bytes), "forward workspace size", shape);
      check_frontend(backward->get_workspace_size(backward_bytes), "backward workspace size", shape);
      workspace =
          device_buffer<std::uint8_t>(std::size_t(std::max<std::int64_t>(forward_bytes, backward_bytes)));
    } catch (...) {
      release();
      throw;
    }
  }
  ~graphs() { release(); }
  graphs(const graphs&) = delete;
  graphs& operator=(const graphs&) = delete;

  std::size_t workspace_bytes() const { return workspace.size(); }

  // The plans were made with the handle: they go first, the handle last (members would otherwise
  // outlive the handle that cudnnDestroy has already released).
  void release() {
    forward.reset();
    backward.reset();
    cudnnDestroy(handle);
  }

  void execute(fe::graph::Graph& graph, std::unordered_map<uid, void*>& pack, cudaStream_t stream,
               const char* which) {
    check_cudnn(cudnnSetStream(handle, stream), "cudnnSetStream");
    check_frontend(graph.execute(handle, pack, workspace.data()), which, shape);
  }
};

bool cudnn_attention_built() { return true; }

// An H100 SXM as cuDNN describes a device (its JSON form of cudaDeviceProp's fields), for lowering
// graphs on a machine without one. cuDNN 9.2x requires three more fields than 9.19 does
// (smCountOrigin, memoryBusWidth, and oversizedSharedMemoryPerBlock, which on a GPU without that
// mode is the opt-in maximum); older versions ignore them.
constexpr const char* h100_properties = R"({"deviceName": "NVIDIA H100 80GB HBM3", "cudaDeviceId": 0,
  "deviceVer": 900, "driverVer": 13000, "multiProcessorCount": 132, "smCountOrigin": 0,
  "totalGlobalMem": 85520809984, "memoryBusWidth": 5120, "oversizedSharedMemoryPerBlock": 232448,
  "maxGridSize": [2147483647, 65535, 65535], "maxBlockSize": [1024, 1024, 64], "regsPerBlock": 65536,
  "smClockRateKHz": 1980000, "memClockRateKHz": 2619000, "l2CacheSize": 52428800, "warpSize": 32,
  "maxSharedMemoryPerBlock": 49152, "maxSharedMemoryPerBlockOptin": 232448,
  "reservedSharedMemoryPerBlock": 1024, "maxRegistersPerSM": 65536, "pciDeviceId": 0, "maxCtasPerSM": 32,
  "maxThreadsPerBlock": 1024, "maxThreadsPerSM": 2048, "isTccDriver": 0, "supportCoopLaunch": 1})";

namespace {

// `shape`'s forward and backward graphs for the H100 described above, validated and lowered, and with
// `engines` also through cuDNN's heuristics (HeurMode_t::A, as the device path) and its support check
// of the engines they list. Returns "" or the graph, the stage and cuDNN's reason.
std::string h100_graphs_error(const attention_shape& shape, bool engines) {
  if (cudnnGetVersion() < 90800) return "lowering without a device needs cuDNN 9.8 or newer";
  const std::string json = h100_properties;
  auto device = std::make_shared<fe::DeviceProperties>();
  const fe::error_t loaded = device->deserialize(std::vector<std::uint8_t>(json.begin(), json.end()));
  if (!loaded.is_good()) return "the H100 description: " + fe::error_t(loaded).get_message();
  std::vector<tensor_ptr> tensors[2];
  std::pair<const char*, std::shared_ptr<fe::graph::Graph>> graphs[2] = {{"forward", nullptr},
                                                                         {"backward", nullptr}};
  // The frontend's sdpa() throws when it can pick no implementation for a shape; that is a reason
  // like validate()'s, to be reported with its stage rather than escape as an exception.
  try {
    graphs[0].second = forward_graph(shape, device, &tensors[0]);
    graphs[1].second = backward_graph(shape, device, &tensors[1]);
  } catch (const std::exception& e) {
    return std::string(graphs[0].second ? "backward" : "forward") + " graph: sdpa: " + e.what();
  }
  for (std::size_t g = 0; g < 2; ++g) {
    const auto& [which, graph] = graphs[g];
    fe::error_t status = graph->validate();
    if (!status.is_good()) return std::string(which) + " graph: validate: " + status.get_message();
    status = graph->build_operation_graph(nullptr);
    if (!status.is_good())
      return std::string(which) + " graph: build_operation_graph: " + status.get_message();
    const std::string pack = g == 0 ? pack_error(tensors[g], forward_pack_uids, shape)
                                    : pack_error(tensors[g], backward_pack_uids, shape);
    if (!pack.empty()) return std::string(which) + " graph: variant pack: " + pack;
    if (!engines) continue;
    status = graph->create_execution_plans({fe::HeurMode_t::A});
    if (!status.is_good())
      return std::string(which) + " graph: create_execution_plans: " + status.get_message();
    status = graph->check_support();
    if (!status.is_good()) return std::string(which) + " graph: check_support: " + status.get_message();
  }
  return {};
}

}  // namespace

std::string cudnn_attention_lowering_error(const attention_shape& shape) {
  return h100_graphs_error(shape, false);
}

std::string cudnn_attention_support_error(const attention_shape& shape) {
  return h100_graphs_error(shape, true);
}

std::string cudnn_attention_versions() {
  const std::size_t v = cudnnGetVersion();  // major * 10000 + minor * 100 + patch since cuDNN 9
  return "cuDNN " + std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100) + " (frontend " + std::to_string(CUDNN_FRONTEND_MAJOR_VERSION) + "." +
         std::to_string(CUDNN_FRONTEND_MINOR_VERSION) + "." + std::to_string(CUDNN_FRONTEND_PATCH_VERSION) +
         ")";
}

cudnn_attention::cudnn_attention(const attention_shape& shape) {
  if (shape.batch <= 0 || shape.context <= 0 || shape.heads <= 0 || shape.channels <= 0 ||
      shape.channels % shape.heads != 0) {
    throw fp8::invalid_argument(
        "trainer::cuda::cudnn_attention: needs positive B, T, H, C with C a multiple of H");
  }
  try {
    graphs_ = std::make_unique<graphs>(shape);
  } catch (const std::exception& e) {
    if (dynamic_cast<const fp8::error*>(&e) != nullptr) throw;
    // The frontend's older descriptor builders throw cudnn_frontend::cudnnException where a status
    // is not passed back: still cuDNN's reason, so --attention auto falls back as it does for others.
    throw fp8::error(std::string("trainer::cuda::cudnn_attention: ") + e.what());
  }
}

void cudnn_attention::forward(std::uint16_t* o, float* stats, const std::uint16_t* q, const std::uint16_t* k,
                              const std::uint16_t* v, cudaStream_t stream) {
  auto pack = variant_pack(forward_pack_uids, {q, k, v, o, stats});
  graphs_->execute(*graphs_->forward, pack, stream, "forward execute");
}

void cudnn_attention::backward(std::uint16_t* dq, std::uint16_t* dk, std::uint16_t* dv,
                               const std::uint16_t* q, const std::uint16_t* k, const std::uint16_t* v,
                               const std::uint16_t* o, const std::uint16_t* d_o, const float* stats,
                               cudaStream_t stream) {
  auto pack = variant_pack(backward_pack_uids, {q, k, v, o, d_o, stats, dq, dk, dv});
  graphs_->execute(*graphs_->backward, pack, stream, "backward execute");
}

#else  // built without cuDNN

struct cudnn_attention::graphs {
  attention_shape shape;
  std::size_t workspace_bytes() const { return 0; }
};

bool cudnn_attention_built() { return false; }

std::string cudnn_attention_versions() { return "no cuDNN in this build"; }

std::string cudnn_attention_lowering_error(const attention_shape&) { return "no cuDNN in this build"; }

std::string cudnn_attention_support_error(const attention_shape&) { return "no cuDNN in this build"; }

cudnn_attention::cudnn_attention(const attention_shape&) {
  throw fp8::error(
      "trainer::cuda::cudnn_attention: this build has no cuDNN (cmake/fp8_cudnn.cmake found no cuDNN, no "
      "cuDNN frontend headers, or headers that do not build against that cuDNN; scripts/setup.sh fetches "
      "the headers)");
}

void cudnn_attention::forward(std::uint16_t*, float*, const std::uint16_t*, const std::uint16_t*,
                              const std::uint16_t*, cudaStream_t) {}
void cudnn_attention::backward(std::uint16_t*, std::uint16_t*, std::uint16_t*, const std::uint16_t*,
                               const std::uint16_t*, const std::uint16_t*, const std::uint16_t*,
                               const std::uint16_t*, const float*, cudaStream_t) {}

#endif

cudnn_attention::~cudnn_attention() = default;

const attention_shape& cudnn_attention::shape() const { return graphs_->shape; }

std::size_t cudnn_attention::workspace_bytes() const { return graphs_->workspace_bytes(); }

}  // namespace trainer::cuda
