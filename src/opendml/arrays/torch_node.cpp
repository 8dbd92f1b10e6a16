// opendml's autograd node for eager PyTorch (arrays/torch_node.py builds and loads it).
//
// A Python torch.autograd.Function costs tens of microseconds per forward +
// backward more than PyTorch's own C++ nodes (its apply, the Python context
// object, the PyNode that calls back into Python). This node is a plain C++
// torch::autograd::Node, like the ones PyTorch generates for its own
// operators: the forward runs opendml's kernel route (a Python callable: the
// call cache serves it from C) and records this node; the engine calls the
// node's apply, which calls the operator's adjoint (a Python callable that
// goes through the array API, so a gradient of a gradient takes the same
// routes again). Each operator gets its own Python type for grad_fn
// (opendml_<op>Backward), registered the way PyTorch registers its own.
//
// Only the routing is here: which kernel runs and every rule stay in Python.
#include <torch/extension.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/python_cpp_function.h>

#include <array>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>

namespace py = pybind11;
using torch::autograd::Node;
using torch::autograd::variable_list;

namespace {

constexpr int kSlots = 64;  // distinct grad_fn types (one per operator name)

// The pointer type the engine holds nodes by: std::shared_ptr in older
// PyTorch releases, c10::intrusive_ptr in newer ones.
using NodePtr = decltype(std::declval<torch::autograd::Edge>().function);

template <class P>
struct is_shared : std::false_type {};
template <class T>
struct is_shared<std::shared_ptr<T>> : std::true_type {};

// A call spec, (cached, code, args, fallback): cached(code, t, *args) is the
// call cache's C function (None where the call is not cached), fallback(t)
// the same call through Python.
at::Tensor run_spec(const py::tuple& spec, const at::Tensor& t) {
  PyObject* cached = PyTuple_GET_ITEM(spec.ptr(), 0);
  py::object tensor = py::cast(t);
  if (cached != Py_None) {
    PyObject* args = PyTuple_GET_ITEM(spec.ptr(), 2);
    const Py_ssize_t n = PyTuple_GET_SIZE(args);
    py::tuple call(n + 2);
    PyObject* code = PyTuple_GET_ITEM(spec.ptr(), 1);
    Py_INCREF(code);
    PyTuple_SET_ITEM(call.ptr(), 0, code);
    PyTuple_SET_ITEM(call.ptr(), 1, tensor.inc_ref().ptr());
    for (Py_ssize_t i = 0; i < n; ++i) {
      PyObject* a = PyTuple_GET_ITEM(args, i);
      Py_INCREF(a);
      PyTuple_SET_ITEM(call.ptr(), i + 2, a);
    }
    PyObject* out = PyObject_Call(cached, call.ptr(), nullptr);
    if (out == nullptr) throw py::error_already_set();
    py::object result = py::reinterpret_steal<py::object>(out);
    if (!result.is_none()) return result.cast<at::Tensor>();
  }
  return spec[3](tensor).cast<at::Tensor>();
}

struct Backward : Node {
  explicit Backward(py::tuple adjoint) : adjoint_(std::move(adjoint)) {}

  ~Backward() override {
    if (!adjoint_.ptr()) return;
    if (Py_IsInitialized()) {
      py::gil_scoped_acquire gil;
      adjoint_.release().dec_ref();
    } else {
      adjoint_.release();  // the interpreter is gone: nothing left to release it into
    }
  }

  variable_list apply(variable_list&& grads) override {
    if (!grads[0].defined()) return {at::Tensor()};
    py::gil_scoped_acquire gil;
    try {
      return {run_spec(adjoint_, grads[0])};
    } catch (py::error_already_set& e) {
      // The adjoint's own exception (an opendml error, ...), kept with the
      // error so that the engine can raise it on the thread that called
      // backward, which need not be this one (CUDA device threads,
      // reentrant backward), as PyNode does.
      e.restore();
      python_error err;
      err.persist();
      throw err;
    }
  }

  void release_variables() override {}  // nothing saved: backward may run again, as for torch.flip

  py::tuple adjoint_;
};

template <int K>
struct Slot final : Backward {
  using Backward::Backward;
  static std::string label;
  std::string name() const override { return label; }
};
template <int K>
std::string Slot<K>::label;

std::array<PyTypeObject, kSlots> types{};
int used = 0;

template <class P, class X>
P make_node(py::tuple adjoint) {
  if constexpr (is_shared<P>::value) {
    return P(new X(std::move(adjoint)));
  } else {
    return c10::make_intrusive<X>(std::move(adjoint));
  }
}

using Maker = NodePtr (*)(py::tuple);
template <int... K>
std::array<Maker, kSlots> makers(std::integer_sequence<int, K...>) {
  return {&make_node<NodePtr, Slot<K>>...};
}
template <int... K>
std::array<const std::type_info*, kSlots> infos(std::integer_sequence<int, K...>) {
  return {&typeid(Slot<K>)...};
}
template <int... K>
std::array<std::string*, kSlots> labels(std::integer_sequence<int, K...>) {
  return {&Slot<K>::label...};
}
const auto kMakers = makers(std::make_integer_sequence<int, kSlots>{});
const auto kInfos = infos(std::make_integer_sequence<int, kSlots>{});
const auto kLabels = labels(std::make_integer_sequence<int, kSlots>{});

// A new grad_fn type named `name` (e.g. opendml_unfoldBackward); its slot number.
int slot(const std::string& name) {
  for (int k = 0; k < used; ++k) {
    if (*kLabels[k] == name) return k;
  }
  if (used == kSlots) throw std::runtime_error("opendml autograd node: more than 64 operator names");
  int k = used++;
  *kLabels[k] = name;
  torch::autograd::_initFunctionPyTypeObject(types[k], kLabels[k]->c_str(), nullptr, nullptr);
  Py_INCREF(&types[k]);
  torch::autograd::registerCppFunction(*kInfos[k], &types[k]);
  return k;
}

// The kernel spec on x with grad mode off (opendml's kernel route; the call
// cache serves it), then, where autograd records, this slot's node with the
// adjoint spec as its backward.
at::Tensor apply(const at::Tensor& x, int k, const py::tuple& kernel, py::tuple adjoint) {
  if (kernel.size() != 4 || adjoint.size() != 4 || !PyTuple_Check(kernel[2].ptr()) ||
      !PyTuple_Check(adjoint[2].ptr())) {
    throw std::invalid_argument("opendml autograd node: a call spec is (cached, code, args tuple, fallback)");
  }
  if (k < 0 || k >= used) throw std::out_of_range("opendml autograd node: no such slot");
  const bool record = torch::autograd::compute_requires_grad(x);
  at::Tensor y;
  {
    at::AutoGradMode no_grad(false);
    y = run_spec(kernel, x);
  }
  if (record) {
    if (y.requires_grad() || y.is_view() || y.is_same(x)) {
      throw std::runtime_error("opendml autograd node: the kernel route returned a tensor autograd already knows");
    }
    NodePtr node = kMakers[k](std::move(adjoint));
    node->set_next_edges(torch::autograd::collect_next_edges(x));
    torch::autograd::set_history(y, node);
  }
  return y;
}

// apply with everything but x bound: what the call cache's eager entry calls.
py::cpp_function recorder(int k, py::tuple kernel, py::tuple adjoint) {
  if (k < 0 || k >= used) throw std::out_of_range("opendml autograd node: no such slot");
  return py::cpp_function([k, kernel, adjoint](const at::Tensor& x) { return apply(x, k, kernel, adjoint); });
}

}  // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("slot", &slot, "the grad_fn type (its slot) for an operator's backward name");
  m.def("apply", &apply, "kernel(x) recorded for autograd with adjoint as its backward");
  m.def("recorder", &recorder, "apply with the slot and specs bound: recorder(k, kernel, adjoint)(x)");
}
