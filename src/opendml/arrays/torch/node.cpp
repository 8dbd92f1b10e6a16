// opendml's autograd node and dispatcher operators for PyTorch (arrays/torch/node.py builds and loads it). The
// node is a plain C++ torch::autograd::Node, as PyTorch generates for its own operators: the forward runs opendml's
// kernel route (a Python callable the call cache serves from C) and records the node; its apply calls the operator's
// adjoint through the array API, so a gradient of a gradient takes the same routes. Each operator gets its own
// grad_fn type (opendml_<op>Backward), registered as PyTorch registers its own. Only routing is here: which kernel
// runs and every rule stay in Python.
#include <torch/extension.h>
#include <torch/csrc/Exceptions.h>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/graph_task.h>
#include <torch/csrc/autograd/functions/utils.h>
#include <torch/csrc/autograd/python_cpp_function.h>
#include <torch/csrc/jit/frontend/tracer.h>
#include <torch/csrc/jit/python/pybind_utils.h>
#include <torch/library.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/csrc/autograd/python_variable.h>
#include <c10/core/impl/TorchDispatchModeTLS.h>
#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/SmallVector.h>

#include "../../runtime/native/torch_api.h"

#include <array>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

namespace py = pybind11;
using torch::autograd::Node;
using torch::autograd::variable_list;

namespace {

constexpr int kSlots = 64;  // distinct grad_fn types (one per operator name)

// The pointer type the engine holds nodes by: std::shared_ptr in older PyTorch releases, c10::intrusive_ptr in newer.
using NodePtr = decltype(std::declval<torch::autograd::Edge>().function);

template <class P>
struct is_shared : std::false_type {};
template <class T>
struct is_shared<std::shared_ptr<T>> : std::true_type {};

// `out` (a new reference), or the Python error a null `out` signals thrown (with the GIL held).
PyObject* checked(PyObject* out) {
  if (out == nullptr) throw py::error_already_set();
  return out;
}

// A call spec, (cached, code, args, fallback): cached(code, x, *args) is the call cache's C function (None: not
// cached; it answers None where it has no entry), fallback(x) the same call through Python. The spec's call on x (a
// tensor's Python object), by vectorcall: a new reference, or an exception thrown (GIL held; the caller keeps spec
// alive).
PyObject* call_spec(PyObject* spec, PyObject* x) {
  PyObject* cached = PyTuple_GET_ITEM(spec, 0);
  if (cached != Py_None) {
    PyObject* args = PyTuple_GET_ITEM(spec, 2);
    const Py_ssize_t n = PyTuple_GET_SIZE(args);
    c10::SmallVector<PyObject*, 8> argv(static_cast<size_t>(n) + 2);
    argv[0] = PyTuple_GET_ITEM(spec, 1);
    argv[1] = x;
    for (Py_ssize_t i = 0; i < n; ++i) argv[i + 2] = PyTuple_GET_ITEM(args, i);
    PyObject* out = checked(PyObject_Vectorcall(cached, argv.data(), static_cast<size_t>(n) + 2, nullptr));
    if (out != Py_None) return out;
    Py_DECREF(out);
  }
  return checked(PyObject_CallOneArg(PyTuple_GET_ITEM(spec, 3), x));
}

// The tensor of a spec's result (a reference `out` keeps alive).
const at::Tensor& tensor_of(PyObject* out) {
  if (!THPVariable_Check(out)) {
    throw std::runtime_error(std::string("opendml autograd node: the kernel route returned a ") +
                             Py_TYPE(out)->tp_name + ", not a tensor");
  }
  return THPVariable_Unpack(out);
}

// The tensor of a spec's result `out` (released here), for autograd to keep: where `out` is the only reference to a
// tensor whose storage nothing else shares (a new output, as the call cache's are), a tensor of its own over the same
// storage, sizes, strides and version counter, so that the engine releasing it later (on its device threads) needs no
// GIL to release a Python object; else the tensor itself.
at::Tensor unshared(py::object& out) {
  const at::Tensor& y = tensor_of(out.ptr());  // (a reference: no count taken)
  c10::TensorImpl* impl = y.unsafeGetTensorImpl();
  if (Py_REFCNT(out.ptr()) == 1 && y.use_count() == 1 && y.has_storage() && y.storage().use_count() == 1 &&
      !y.requires_grad() && !impl->is_python_dispatch()) {
    at::Tensor own(impl->shallow_copy_and_detach(impl->version_counter(), /*allow_tensor_metadata_change=*/true));
    out = py::object();  // the Python object and its tensor, released now (the GIL is held)
    return own;
  }
  return y;
}

// Whether the engine's current task runs every node it reaches (backward() without inputs): the gradient goes on to
// AccumulateGrad nodes, which keep it as x.grad (unshared pays there), not back to Python (autograd.grad, where a
// tensor that has its Python object already is returned cheaper).
bool runs_every_node() {
  const auto* info = torch::autograd::get_current_graph_task_exec_info();
  return info != nullptr && info->empty();
}

// Whether `spec` is a call spec (cached, code, args tuple, fallback).
bool is_spec(PyObject* spec) {
  return PyTuple_Check(spec) && PyTuple_GET_SIZE(spec) == 4 && PyTuple_Check(PyTuple_GET_ITEM(spec, 2));
}

// A node holding a tuple of Python objects (``held_``), released with the GIL taken. Nothing is saved, so backward
// may run again, as for torch.flip.
struct TupleNode : Node {
  explicit TupleNode(py::tuple held) : held_(std::move(held)) {}

  ~TupleNode() override {
    if (!held_.ptr()) return;
    if (Py_IsInitialized()) {
      py::gil_scoped_acquire gil;
      held_.release().dec_ref();
    } else {
      held_.release();  // the interpreter is gone: nothing left to release it into
    }
  }

  // A Python exception of backward, kept with the error so that the engine raises it on the thread that called
  // backward, which need not be this one (CUDA device threads, reentrant backward), as PyNode does.
  [[noreturn]] static void rethrow(py::error_already_set& e) {
    e.restore();
    python_error err;
    err.persist();
    throw err;
  }

  py::tuple held_;
};

struct Backward : TupleNode {  // held_: the adjoint's spec
  using TupleNode::TupleNode;

  variable_list apply(variable_list&& grads) override {
    if (!grads[0].defined()) return {at::Tensor()};
    py::gil_scoped_acquire gil;
    try {
      py::object g = py::reinterpret_steal<py::object>(checked(THPVariable_Wrap(grads[0])));
      // g holds the gradient from here: a Python object made for it (an upstream node's gradient has none) is
      // released with its tensor below, GIL held, not left to the engine to release later by taking the GIL again.
      grads[0].reset();
      py::object out = py::reinterpret_steal<py::object>(call_spec(held_.ptr(), g.ptr()));
      return {runs_every_node() ? unshared(out) : tensor_of(out.ptr())};
    } catch (py::error_already_set& e) {
      rethrow(e);
    }
  }
};

template <class Base, int K>
struct Slot final : Base {
  using Base::Base;
  static inline std::string label;
  std::string name() const override { return label; }
};

template <class P, class X>
P make_node(py::tuple payload) {
  if constexpr (is_shared<P>::value) {
    return P(new X(std::move(payload)));
  } else {
    return c10::make_intrusive<X>(std::move(payload));
  }
}

// A slot's node maker, C++ type and name.
struct SlotEntry {
  NodePtr (*make)(py::tuple);
  const std::type_info* info;
  std::string* label;
};

// kSlots grad_fn types over node class Base, each registered with its own Python type on first use (slot(name)).
template <class Base>
struct Types {
  template <int... K>
  static std::array<SlotEntry, kSlots> entries(std::integer_sequence<int, K...>) {
    return {SlotEntry{&make_node<NodePtr, Slot<Base, K>>, &typeid(Slot<Base, K>), &Slot<Base, K>::label}...};
  }
  static inline const auto kEntries = entries(std::make_integer_sequence<int, kSlots>{});
  static inline std::array<PyTypeObject, kSlots> types{};
  static inline int used = 0;

  // A new grad_fn type named `name` (e.g. opendml_unfoldBackward); its slot number.
  static int slot(const std::string& name) {
    for (int k = 0; k < used; ++k) {
      if (*kEntries[k].label == name) return k;
    }
    if (used == kSlots) throw std::runtime_error("opendml autograd node: more than 64 operator names");
    int k = used++;
    *kEntries[k].label = name;
    torch::autograd::_initFunctionPyTypeObject(types[k], kEntries[k].label->c_str(), nullptr, nullptr);
    Py_INCREF(&types[k]);
    torch::autograd::registerCppFunction(*kEntries[k].info, &types[k]);
    return k;
  }
};

using NodeTypes = Types<Backward>;

// The kernel spec on x (a tensor's Python object) with grad mode off, then, where autograd records, this slot's node
// with the adjoint spec as its backward: the kernel's result, a new reference.
PyObject* record(PyObject* x, int k, PyObject* kernel, PyObject* adjoint) {
  const bool recording = torch::autograd::compute_requires_grad(THPVariable_Unpack(x));
  py::object out;
  {
    at::AutoGradMode no_grad(false);
    out = py::reinterpret_steal<py::object>(call_spec(kernel, x));
  }
  if (recording) {
    const at::Tensor& y = tensor_of(out.ptr());
    const at::Tensor& t = THPVariable_Unpack(x);
    if (y.requires_grad() || y.is_view() || y.is_same(t)) {
      throw std::runtime_error("opendml autograd node: the kernel route returned a tensor autograd already knows");
    }
    NodePtr node = NodeTypes::kEntries[k].make(py::reinterpret_borrow<py::tuple>(adjoint));
    node->set_next_edges(torch::autograd::collect_next_edges(t));
    torch::autograd::set_history(y, node);
  }
  return out.release().ptr();
}

// record with everything but x bound (what the call cache's eager entry calls on every repeated call): called by
// vectorcall with no argument conversion, its errors raised as PyTorch's own functions raise them.
struct Recorder {
  PyObject_HEAD
  vectorcallfunc vectorcall;
  int slot;
  PyObject* kernel;
  PyObject* adjoint;
};

PyObject* recorder_call(PyObject* self, PyObject* const* args, size_t nargsf, PyObject* kwnames) {
  if (PyVectorcall_NARGS(nargsf) != 1 || (kwnames != nullptr && PyTuple_GET_SIZE(kwnames) != 0) ||
      !THPVariable_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "opendml autograd node: a recorder takes one tensor");
    return nullptr;
  }
  auto* r = reinterpret_cast<Recorder*>(self);
  try {
    return record(args[0], r->slot, r->kernel, r->adjoint);
  } catch (const std::exception&) {  // (Python errors restored as themselves)
    torch::translate_exception_to_python(std::current_exception());
    return nullptr;
  }
}

void recorder_dealloc(PyObject* self) {
  auto* r = reinterpret_cast<Recorder*>(self);
  Py_XDECREF(r->kernel);
  Py_XDECREF(r->adjoint);
  Py_TYPE(self)->tp_free(self);
}

PyTypeObject* recorder_type() {
  static PyTypeObject type = [] {
    PyTypeObject t{PyVarObject_HEAD_INIT(nullptr, 0)};
    t.tp_name = "opendml_torch_node.Recorder";
    t.tp_basicsize = sizeof(Recorder);
    t.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
    t.tp_vectorcall_offset = offsetof(Recorder, vectorcall);
    t.tp_call = PyVectorcall_Call;
    t.tp_dealloc = recorder_dealloc;
    t.tp_doc = "recorder(x): kernel(x), recorded for autograd with adjoint as its backward";
    return t;
  }();
  if (!(type.tp_flags & Py_TPFLAGS_READY) && PyType_Ready(&type) < 0) throw py::error_already_set();
  return &type;
}

py::object recorder(int k, const py::tuple& kernel, const py::tuple& adjoint) {
  if (!is_spec(kernel.ptr()) || !is_spec(adjoint.ptr())) {
    throw std::invalid_argument("opendml autograd node: a call spec is (cached, code, args tuple, fallback)");
  }
  if (k < 0 || k >= NodeTypes::used) throw std::out_of_range("opendml autograd node: no such slot");
  auto* r = PyObject_New(Recorder, recorder_type());
  if (r == nullptr) throw py::error_already_set();
  r->vectorcall = recorder_call;
  r->slot = k;
  r->kernel = kernel.inc_ref().ptr();
  r->adjoint = adjoint.inc_ref().ptr();
  return py::reinterpret_steal<py::object>(reinterpret_cast<PyObject*>(r));
}

// The check an eager entry's call passes first (runtime/native/calls.c asks it on every call autograd must record),
// as adapter._eager_ok answers it, without a Python frame: the node in use (state["module"] set), no TorchScript
// trace, no torch.func transform in force, compiled autograd off (torch._dynamo.compiled_autograd's flag, where
// sys.modules holds it), torch_node not "off" in the settings in force (runtime.config's _current). Anything else
// (settings never read, a state without its entry) is answered by the Python check (`fallback`). The names it reads,
// each X(member, text), are interned once (module last: set once every name is).
#define ODML_EAGER_NAMES(X)                                                                   \
  X(current, "_current") X(torch_node, "torch_node") X(off, "off")                            \
  X(compiled, "torch._dynamo.compiled_autograd") X(enabled, "compiled_autograd_enabled")      \
  X(modules, "modules") X(module, "module")
struct EagerNames {
#define ODML_MEMBER(member, text) PyObject* member = nullptr;
  ODML_EAGER_NAMES(ODML_MEMBER)
#undef ODML_MEMBER
};
EagerNames eager_names;

PyObject* eager_ok(PyObject* self, PyObject*) {  // self: (node state, runtime.config's and sys's dicts, fallback)
  const EagerNames& n = eager_names;
  PyObject* fallback = PyTuple_GET_ITEM(self, 3);
  PyObject* module = PyDict_GetItemWithError(PyTuple_GET_ITEM(self, 0), n.module);
  if (module == nullptr) return PyErr_Occurred() ? nullptr : PyObject_CallNoArgs(fallback);
  if (module == Py_None || torch::jit::tracer::isTracing()) Py_RETURN_FALSE;
  // a torch.func transform in force (torch._C._are_functorch_transforms_active's test): the Function's route
  const c10::DispatchKeySet tls = c10::impl::tls_local_dispatch_key_set().included_;
  if (tls.has(c10::DispatchKey::FuncTorchDynamicLayerFrontMode) ||
      tls.has(c10::DispatchKey::FuncTorchDynamicLayerBackMode))
    Py_RETURN_FALSE;
  PyObject* modules = PyDict_GetItemWithError(PyTuple_GET_ITEM(self, 2), n.modules);  // sys.modules
  if (modules == nullptr || !PyDict_Check(modules)) return PyErr_Occurred() ? nullptr : PyObject_CallNoArgs(fallback);
  PyObject* ca = PyDict_GetItemWithError(modules, n.compiled);
  if (ca == nullptr && PyErr_Occurred()) return nullptr;
  if (ca != nullptr && ca != Py_None) {
    PyObject* on = PyObject_GetAttr(ca, n.enabled);
    if (on == nullptr) {
      if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return nullptr;
      PyErr_Clear();
    } else {
      const int truth = PyObject_IsTrue(on);
      Py_DECREF(on);
      if (truth < 0) return nullptr;
      if (truth) Py_RETURN_FALSE;
    }
  }
  PyObject* cfg = PyDict_GetItemWithError(PyTuple_GET_ITEM(self, 1), n.current);
  if (cfg == nullptr && PyErr_Occurred()) return nullptr;
  if (cfg == nullptr || cfg == Py_None) return PyObject_CallNoArgs(fallback);
  PyObject* mode = PyObject_GetAttr(cfg, n.torch_node);
  if (mode == nullptr) return nullptr;
  const int off = PyObject_RichCompareBool(mode, n.off, Py_EQ);
  Py_DECREF(mode);
  if (off < 0) return nullptr;
  return PyBool_FromLong(!off);
}

PyMethodDef eager_ok_def = {"eager_ok", eager_ok, METH_NOARGS,
                            "whether the call cache's eager entries may serve now"};

py::object eager_check(py::dict state, py::dict config_globals, py::dict sys_dict, py::function fallback) {
  EagerNames& n = eager_names;
  if (n.module == nullptr) {
#define ODML_INTERN(member, text) \
  if ((n.member = PyUnicode_InternFromString(text)) == nullptr) throw py::error_already_set();
    ODML_EAGER_NAMES(ODML_INTERN)
#undef ODML_INTERN
  }
  py::tuple self = py::make_tuple(state, config_globals, sys_dict, fallback);
  return py::reinterpret_steal<py::object>(checked(PyCFunction_New(&eager_ok_def, self.ptr())));
}

// -- dispatcher operators ---------------------------------------------------------------------------
//
// The operators torch.compile graphs call (arrays/torch/adapter.py defines their schemas and fake kernels in a
// namespace of their own). Every kernel is boxed and generic over the schema: the CPU and CUDA kernels turn the
// arguments into Python objects once and call the operator's spec, the call cache's C function first (no Python on
// a hit), the Python kernel on a miss; the Autograd kernel runs the operator below autograd and, where a gradient is
// needed, records an OpBackward node whose apply calls the Python backward formula, which calls these operators
// again (so gradients of gradients, and AOTAutograd's traces of backward, take them).

constexpr size_t kMaxArgs = 16;  // the code, arguments and extra arguments of a call; more take a vector (run_op)

// An operator's kernel spec: cached(code, *args, *extra) is the call cache's function (Py_None: none), fallback(*args)
// the Python kernel, list_out whether the schema returns Tensor[], split the number of int lists the operator's one
// list argument packs (0: not packed; see Operands). Kept for the life of the process (a kernel may run until it
// ends).
struct OpSpec {
  PyObject* name = nullptr;
  PyObject* cached = nullptr;
  PyObject* code = nullptr;
  PyObject* extra = nullptr;
  PyObject* fallback = nullptr;
  bool list_out = false;
  int slot = -1;
  size_t split = 0;
  std::array<PyObject*, kMaxArgs> lists{};  // per argument: the int list run_op made last (Operands)
};
PyObject* op_backward = nullptr;  // backward(name, saved, grads) -> a gradient (or None) per input tensor

// A new list of the ints items[start, start + count).
PyObject* int_list(c10::ArrayRef<c10::IValue> items, size_t start, size_t count) {
  PyObject* out = checked(PyList_New(static_cast<Py_ssize_t>(count)));
  for (size_t i = 0; i < count; ++i) {
    PyObject* n = PyLong_FromLongLong(items[start + i].toInt());
    if (n == nullptr) {
      Py_DECREF(out);
      throw py::error_already_set();
    }
    PyList_SET_ITEM(out, static_cast<Py_ssize_t>(i), n);
  }
  return out;
}

// A new reference to the Python form of an argument: a tensor, a list of ints (what the call cache keys), else what
// TorchScript makes of it (SymInts, strings, tensor lists).
PyObject* to_py(const c10::IValue& v) {
  if (v.isTensor()) return checked(THPVariable_Wrap(v.toTensor()));
  if (v.isIntList()) {
    const auto ints = v.toListRef();
    return int_list(ints, 0, ints.size());
  }
  return torch::jit::toPyObject(v).release().ptr();
}

// Whether `list` (an exact list only this file and the call cache's C function see) holds the ints
// items[start, start + count).
bool same_ints(PyObject* list, c10::ArrayRef<c10::IValue> items, size_t start, size_t count) {
  if (PyList_GET_SIZE(list) != static_cast<Py_ssize_t>(count)) return false;
  for (size_t i = 0; i < count; ++i) {
    PyObject* item = PyList_GET_ITEM(list, static_cast<Py_ssize_t>(i));
    int overflow = 0;
    const long long x = PyLong_AsLongLongAndOverflow(item, &overflow);  // (items are exact ints: made by int_list)
    if (overflow != 0 || x != items[start + i].toInt()) return false;
  }
  return true;
}

// An int list for argument slot `index` of `spec` (argv[index + 1]), a new reference: with reuse, the list this slot
// made last where it holds the same ints, else a new one the slot keeps (see Operands).
PyObject* ints_for(OpSpec& spec, size_t index, c10::ArrayRef<c10::IValue> items, size_t start, size_t count,
                   bool reuse) {
  if (!reuse) return int_list(items, start, count);  // (index < kMaxArgs: register_ops checks split)
  PyObject*& cached = spec.lists[index];
  if (cached == nullptr || !same_ints(cached, items, start, count)) {
    PyObject* made = int_list(items, start, count);
    Py_XSETREF(cached, made);
  }
  Py_INCREF(cached);
  return cached;
}

// The operands of one call to the call cache (GIL held): argv[0] is the operator's code, then each argument, then the
// spec's extra arguments. An int[] argument's list is the one the previous call of this operator made for it where
// it holds the same ints (OpSpec::lists), else a new one the next call may reuse (Inductor's wrapper passes the same
// lists on every call: this saves making, keying and freeing a list per argument). These lists go only to the call
// cache's C function, which reads them, passes them to no Python code and keeps no reference (runtime/native/calls.c,
// key_head), so Python code never sees a reused list; the Python kernel (a miss) gets lists of its own (reuse off).
// Lists are made, compared and replaced with the GIL held; a call holds its own reference to each, so another thread
// replacing one while the call cache runs a kernel without the GIL frees nothing in use.
//
// A packed operator (spec.split = k > 0; schema (Tensor, int[] or SymInt[] args)) takes one list holding its k int
// lists of one length one after another (PyTorch's Python entry to the dispatcher converts one list argument for
// about half of what five cost): the operands are the k lists again, each its own argument (reused as above), so the
// call cache's keys and the Python kernel's arguments are the unpacked schema's. run_op checks the packed length
// first (check_packed).
struct Operands {
  std::array<PyObject*, kMaxArgs> fixed{};
  std::vector<PyObject*> spill;
  PyObject** argv = nullptr;
  size_t n = 0;      // arguments converted so far (each a reference this object holds)
  size_t nargs = 0;  // the arguments (after the code, before the extra arguments)
  size_t total = 0;  // the code, the arguments, the extra arguments

  Operands(OpSpec& spec, c10::ArrayRef<c10::IValue> args, bool reuse) {
    const size_t extra = static_cast<size_t>(PyTuple_GET_SIZE(spec.extra));
    const size_t split = spec.split;
    nargs = split > 0 ? args.size() - 1 + split : args.size();
    total = nargs + extra + 1;
    if (total <= kMaxArgs) {
      argv = fixed.data();
    } else {
      spill.assign(total, nullptr);
      argv = spill.data();
    }
    argv[0] = spec.code;
    try {
      if (split > 0) {
        argv[1] = to_py(args[0]);
        n = 1;
        const c10::IValue& packed = args[1];
        if (packed.isIntList()) {
          const auto ints = packed.toListRef();
          const size_t m = ints.size() / split;
          for (size_t j = 0; j < split; ++j, ++n) argv[n + 1] = ints_for(spec, n, ints, j * m, m, reuse);
        } else {  // (SymInts): slices of its Python list
          py::object all = py::reinterpret_steal<py::object>(to_py(packed));
          const Py_ssize_t size = PySequence_Size(all.ptr());
          if (size < 0) throw py::error_already_set();
          const Py_ssize_t m = size / static_cast<Py_ssize_t>(split);
          for (size_t j = 0; j < split; ++j, ++n) {
            const Py_ssize_t lo = static_cast<Py_ssize_t>(j) * m;
            argv[n + 1] = checked(PySequence_GetSlice(all.ptr(), lo, lo + m));
          }
        }
      } else {  // (an unpacked operator: its int lists made anew, never reused)
        for (; n < args.size(); ++n) argv[n + 1] = to_py(args[n]);
      }
    } catch (...) {
      release();
      throw;
    }
    for (size_t j = 0; j < extra; ++j) argv[n + 1 + j] = PyTuple_GET_ITEM(spec.extra, static_cast<Py_ssize_t>(j));
  }
  Operands(const Operands&) = delete;
  Operands& operator=(const Operands&) = delete;
  ~Operands() { release(); }  // (the GIL is held: run_op takes it before and releases it after)

  void release() {
    for (size_t i = 1; i <= n; ++i) Py_DECREF(argv[i]);
    n = 0;
  }
};

// A packed operator's list argument holds spec.split lists of one length: its length must be a multiple of split
// (the Python fake kernel raises the same ValueError, adapter._unpack).
void check_packed(const OpSpec& spec, const c10::OperatorHandle& op, c10::ArrayRef<c10::IValue> args) {
  if (spec.split == 0) return;
  const auto& schema = op.schema();
  TORCH_CHECK_VALUE(args.size() == 2 && args[1].isList(), schema.name(),
                    ": a packed operator takes a tensor and one list");
  const size_t size = args[1].toListRef().size();
  if (size % spec.split == 0) return;
  // Numbers are formatted with std::to_string, never streamed into an ostream: on the H200 machine (PyTorch 2.11,
  // GCC 13) this extension is built with its own static copy of libstdc++, and streaming an integer here crashed the
  // process in that copy's locale code (cuda-gdb: a codecvt facet's do_in); strings stream fine.
  const std::string split = std::to_string(spec.split);
  TORCH_CHECK_VALUE(false, schema.name() + ": " + schema.arguments()[1].name() + " packs " + split +
                               " lists of one length, one after another: its length must be a multiple of " + split +
                               ", not " + std::to_string(size));
}

void run_op(OpSpec& spec, const c10::OperatorHandle& op, torch::jit::Stack* stack) {
  const size_t n = op.schema().arguments().size();
  py::gil_scoped_acquire gil;
  py::object result;
  {
    const auto args = torch::jit::last(*stack, n);
    check_packed(spec, op, args);
    if (spec.cached != Py_None) {
      Operands call(spec, args, true);
      result = py::reinterpret_steal<py::object>(checked(PyObject_Vectorcall(spec.cached, call.argv, call.total,
                                                                             nullptr)));
    }
    if (!result || result.is_none()) {
      Operands call(spec, args, false);
      result = py::reinterpret_steal<py::object>(checked(PyObject_Vectorcall(spec.fallback, call.argv + 1,
                                                                             call.nargs, nullptr)));
    }
  }
  torch::jit::drop(*stack, n);
  if (spec.list_out) {
    torch::jit::push(*stack, result.cast<std::vector<at::Tensor>>());
  } else if (THPVariable_Check(result.ptr())) {
    torch::jit::push(*stack, THPVariable_Unpack(result.ptr()));  // (what result.cast<at::Tensor>() gives)
  } else {
    torch::jit::push(*stack, result.cast<at::Tensor>());  // (its cast error)
  }
}

struct OpBackward : TupleNode {  // held_: (name, saved, input count)
  using TupleNode::TupleNode;

  variable_list apply(variable_list&& grads) override {
    py::gil_scoped_acquire gil;
    const size_t n = held_[2].cast<size_t>();
    variable_list result(n);
    bool any = false;
    for (const auto& g : grads) any = any || g.defined();
    if (!any) return result;
    try {
      py::tuple g(grads.size());
      for (size_t i = 0; i < grads.size(); ++i) {
        g[i] = grads[i].defined() ? py::cast(grads[i]) : py::none();
      }
      py::object out = py::reinterpret_borrow<py::object>(op_backward)(held_[0], held_[1], g);
      size_t i = 0;
      for (py::handle item : out) {
        if (i == n) break;
        if (!item.is_none()) result[i] = item.cast<at::Tensor>();
        ++i;
      }
      return result;
    } catch (py::error_already_set& e) {
      rethrow(e);
    }
  }
};

using OpTypes = Types<OpBackward>;

// The tensors among the last `n` values of `stack`, tensor lists flattened.
c10::SmallVector<at::Tensor, 4> stack_tensors(torch::jit::Stack* stack, size_t n) {
  c10::SmallVector<at::Tensor, 4> out;
  for (const auto& v : torch::jit::last(*stack, n)) {
    if (v.isTensor()) {
      out.push_back(v.toTensor());
    } else if (v.isTensorList()) {
      for (const at::Tensor& t : v.toTensorList()) out.push_back(t);
    }
  }
  return out;
}

void record_op(OpSpec& spec, const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const auto& schema = op.schema();
  const size_t n = schema.arguments().size();
  const c10::SmallVector<at::Tensor, 4> inputs = stack_tensors(stack, n);
  bool record = false;
  for (const auto& t : inputs) {
    // A tangent would be dropped without a word: refused, as the custom operators' route refuses it.
    TORCH_CHECK_NOT_IMPLEMENTED(!torch::autograd::isFwGradDefined(t), schema.name(),
                                ": forward-mode AD (a dual tensor) is not supported by opendml's dispatcher "
                                "operators; call the array API function eagerly, where forward-mode AD is exact");
    record = record || (t.defined() && t.requires_grad());
  }
  record = record && torch::autograd::GradMode::is_enabled();
  std::vector<c10::IValue> args;  // (the kernel takes them off the stack: kept for the node's `saved`)
  if (record) {
    const auto last = torch::jit::last(*stack, n);
    args.assign(last.begin(), last.end());
  }
  {
    at::AutoDispatchBelowADInplaceOrView below;
    at::AutoGradMode no_grad(false);  // the call cache must not take this call for one autograd records
    op.redispatchBoxed(ks & c10::after_ADInplaceOrView_keyset, stack);
  }
  if (!record) return;
  const c10::SmallVector<at::Tensor, 4> outputs = stack_tensors(stack, schema.returns().size());
  NodePtr node;
  {
    py::gil_scoped_acquire gil;
    py::tuple saved(n);  // the arguments, each tensor replaced by its (symbolic) sizes
    for (size_t i = 0; i < n; ++i) {
      const c10::IValue& a = args[i];
      if (a.isTensor()) {
        saved[i] = py::cast(a.toTensor().sym_sizes());
      } else if (a.isTensorList()) {
        py::list sizes;
        for (const at::Tensor& x : a.toTensorList()) sizes.append(py::cast(x.sym_sizes()));
        saved[i] = sizes;
      } else {
        saved[i] = py::reinterpret_steal<py::object>(to_py(a));
      }
    }
    node = OpTypes::kEntries[spec.slot].make(
        py::make_tuple(py::reinterpret_borrow<py::object>(spec.name), std::move(saved), inputs.size()));
  }
  node->set_next_edges(torch::autograd::collect_next_edges(at::ArrayRef<at::Tensor>(inputs)));
  for (const auto& y : outputs) {  // an integer output (a CAST) gets no history: its gradient is None
    if (y.defined() && torch::autograd::isDifferentiableType(y.scalar_type())) {
      torch::autograd::set_history(y, node);
    } else {
      node->add_input_metadata(Node::undefined_input());
    }
  }
}

// An operator's CPU and CUDA kernel (run_op), or its Autograd kernel (record_op).
template <bool Autograd>
struct OpKernel final : c10::OperatorKernel {
  explicit OpKernel(OpSpec* spec) : spec(spec) {}
  void operator()(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
    if constexpr (Autograd) {
      record_op(*spec, op, ks, stack);
    } else {
      run_op(*spec, op, stack);
    }
  }
  OpSpec* spec;
};

template <bool Autograd>
torch::CppFunction op_kernel(OpSpec& spec) {
  return torch::CppFunction::makeFromBoxedFunctor(std::make_unique<OpKernel<Autograd>>(&spec));
}

// CPU, CUDA and Autograd kernels for operators already defined in namespace ns, one per (name, (cached, code, extra
// tuple, fallback), returns a list, grad_fn name, split: how many int lists its one list argument packs, 0: not
// packed); backward(name, saved, grads) is every operator's backward. Registrations stay for the life of the process.
void register_ops(const std::string& ns, const py::list& ops, py::object backward) {
  for (py::handle item : ops) {
    py::tuple entry = py::reinterpret_borrow<py::tuple>(item);
    py::tuple spec = entry[1].cast<py::tuple>();
    if (entry.size() != 5 || spec.size() != 4 || !PyTuple_Check(spec[2].ptr()) || entry[4].cast<int>() < 0 ||
        entry[4].cast<int>() + 2 > static_cast<int>(kMaxArgs)) {
      throw std::invalid_argument("opendml operators: an entry is (name, (cached, code, extra tuple, fallback), "
                                  "list_out, grad_fn name, split count)");
    }
  }
  auto* lib = new torch::Library(torch::Library::FRAGMENT, ns, std::nullopt, __FILE__, __LINE__);  // kept
  if (op_backward == nullptr) op_backward = backward.inc_ref().ptr();
  for (py::handle item : ops) {
    py::tuple entry = py::reinterpret_borrow<py::tuple>(item);
    py::tuple spec = entry[1].cast<py::tuple>();
    OpSpec& s = *new OpSpec();  // kept
    s.name = py::object(entry[0]).release().ptr();
    s.cached = py::object(spec[0]).release().ptr();
    s.code = py::object(spec[1]).release().ptr();
    s.extra = py::object(spec[2]).release().ptr();
    s.fallback = py::object(spec[3]).release().ptr();
    s.list_out = entry[2].cast<bool>();
    s.slot = OpTypes::slot(entry[3].cast<std::string>());
    s.split = entry[4].cast<size_t>();
    const std::string name = entry[0].cast<std::string>();
    lib->impl(name.c_str(), torch::dispatch(c10::DispatchKey::CPU, op_kernel<false>(s)));
    lib->impl(name.c_str(), torch::dispatch(c10::DispatchKey::CUDA, op_kernel<false>(s)));
    lib->impl(name.c_str(), torch::dispatch(c10::DispatchKey::Autograd, op_kernel<true>(s)));
  }
}

}  // namespace

// -- tensor accessors for the C call cache ----------------------------------------------------------
//
// runtime/native/torch_api.h: what calls.c reads of a tensor on every served call (dtype, sizes, strides, device,
// data pointer, routing facts), its output allocation, the current stream and device, in C++ instead of a dozen
// Python calls. Each gives what the Python accessor it replaces gives (tests/test_torch_api.py compares them).

namespace tapi {

PyObject* fwad_globals = nullptr;  // torch.autograd.forward_ad's globals (its _current_level)
PyObject* s_level = nullptr;

// Whether t's dispatch keys are exactly a plain dense tensor's of its device type, made in normal or inference mode:
// the backend key, the autocast key and (normal mode) the ADInplaceOrView and autograd keys, as TensorImpl's
// constructor sets them. Computed from the backend, never learned from a tensor made here: one made inside a
// functorch transform, a fake-tensor or dispatch mode would carry that context's keys. Any other key (functorch
// wrappers, negative or conjugate bits, Python subclasses, sparse, ...) makes the tensor "wrapped": the Python route
// takes it. A key a PyTorch version adds to every tensor would only send every call down the Python route
// (tests/test_torch_api.py checks plain tensors pass).
bool plain_keys(const at::Tensor& t) {
  c10::BackendComponent backend;
  c10::DispatchKey key;
  if (t.is_cpu()) {
    backend = c10::BackendComponent::CPUBit;
    key = c10::DispatchKey::CPU;
  } else if (t.is_cuda()) {
    backend = c10::BackendComponent::CUDABit;
    key = c10::DispatchKey::CUDA;
  } else {
    return false;
  }
  const c10::DispatchKeySet inference = c10::DispatchKeySet(key) | c10::getAutocastRelatedKeySetFromBackend(backend);
  const c10::DispatchKeySet normal = inference | c10::getAutogradRelatedKeySetFromBackend(backend);
  const c10::DispatchKeySet ks = t.key_set();
  return ks == normal || ks == inference;
}

// Whether a forward-AD level is open (torch.autograd.forward_ad._current_level >= 0); open where it cannot be read.
bool forward_level_open() {
  PyObject* level = fwad_globals ? PyDict_GetItemWithError(fwad_globals, s_level) : nullptr;
  if (level == nullptr || !PyLong_Check(level)) {
    PyErr_Clear();
    return true;
  }
  const long v = PyLong_AsLong(level);
  if (v == -1 && PyErr_Occurred()) {
    PyErr_Clear();
    return true;
  }
  return v >= 0;
}

int describe(PyObject* x, odml_torch_info* info) {
  if (!THPVariable_Check(x)) return -1;
  try {
    const at::Tensor& t = THPVariable_Unpack(x);
    if (!t.defined() || t.layout() != at::kStrided || t.unsafeGetTensorImpl()->has_symbolic_sizes_strides())
      return -1;
    const int64_t nd = t.dim();
    if (nd > ODML_TORCH_API_RANK) return -1;
    info->dtype = reinterpret_cast<PyObject*>(torch::getTHPDtype(t.scalar_type()));
    info->device = t.is_cpu() ? -1 : t.is_cuda() ? t.device().index() : -2;
    info->ndim = static_cast<int32_t>(nd);
    const auto sizes = t.sizes();
    const auto strides = t.strides();
    for (int64_t i = 0; i < nd; ++i) {
      info->sizes[i] = sizes[i];
      info->strides[i] = strides[i];
    }
    info->requires_grad = t.requires_grad();
    info->grad_enabled = at::GradMode::is_enabled();
    info->dispatch_modes = c10::impl::TorchDispatchModeTLS::stack_len() != 0;
    // (TorchScript tracing: the trace must record the operator, not the result)
    info->wrapped = !plain_keys(t) || !t.has_storage() || forward_level_open() || torch::jit::tracer::isTracing();
    info->data_ptr = info->device >= -1 && t.has_storage() ? reinterpret_cast<uint64_t>(t.data_ptr()) : 0;
    info->pad_ = 0;
    return 0;
  } catch (const std::exception&) {
    return -1;  // (an accessor the tensor refuses): calls.c takes the Python route
  }
}

// f(), or `failed` with a RuntimeError set where it throws (calls.c reads a Python error).
template <class F, class R>
R guarded(F f, R failed) {
  try {
    return f();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
    return failed;
  }
}

PyObject* empty(PyObject* x, const int64_t* sizes, int ndim, PyObject* dtype, uint64_t* data_ptr) {
  if (dtype != nullptr && !THPDtype_Check(dtype)) {
    PyErr_SetString(PyExc_TypeError, "opendml torch_api.empty: dtype is not a torch.dtype");
    return nullptr;
  }
  return guarded([&]() -> PyObject* {
    auto options = THPVariable_Unpack(x).options();
    if (dtype != nullptr) options = options.dtype(reinterpret_cast<THPDtype*>(dtype)->scalar_type);
    at::Tensor out = at::empty(c10::IntArrayRef(sizes, static_cast<size_t>(ndim)), options);
    *data_ptr = reinterpret_cast<uint64_t>(out.data_ptr());
    return THPVariable_Wrap(std::move(out));
  }, static_cast<PyObject*>(nullptr));
}

int current_stream(int64_t device, uint64_t* stream) {
  return guarded([&] {
    c10::impl::VirtualGuardImpl impl(c10::DeviceType::CUDA);
    const c10::Stream s = impl.getStream(c10::Device(c10::DeviceType::CUDA, static_cast<c10::DeviceIndex>(device)));
    *stream = reinterpret_cast<uint64_t>(s.native_handle());
    return 0;
  }, -1);
}

int64_t current_device() {
  return guarded([] { return int64_t{c10::impl::VirtualGuardImpl(c10::DeviceType::CUDA).getDevice().index()}; },
                 int64_t{-1});
}

const odml_torch_api table = {ODML_TORCH_API_VERSION, &describe, &empty, &current_stream, &current_device};

void init() {
  if (fwad_globals == nullptr) {
    py::module_ fwad = py::module_::import("torch.autograd.forward_ad");
    fwad_globals = py::object(fwad.attr("__dict__")).release().ptr();
    s_level = checked(PyUnicode_InternFromString("_current_level"));
  }
}

// The capsule calls.c takes (runtime.calls.register_torch_api).
py::object capsule() {
  init();
  return py::reinterpret_steal<py::object>(
      PyCapsule_New(const_cast<odml_torch_api*>(&table), ODML_TORCH_API_NAME, nullptr));
}

// describe(x) as a tuple, for tests: (dtype, device, data_ptr, sizes, strides, requires_grad, grad_enabled,
// dispatch_modes, wrapped), or None.
py::object describe_py(py::handle x) {
  init();
  odml_torch_info info{};
  if (describe(x.ptr(), &info) < 0) return py::none();
  py::tuple sizes(info.ndim), strides(info.ndim);
  for (int i = 0; i < info.ndim; ++i) {
    sizes[i] = py::int_(info.sizes[i]);
    strides[i] = py::int_(info.strides[i]);
  }
  return py::make_tuple(py::reinterpret_borrow<py::object>(info.dtype), info.device, info.data_ptr, sizes, strides,
                        bool(info.requires_grad), bool(info.grad_enabled), bool(info.dispatch_modes),
                        bool(info.wrapped));
}

}  // namespace tapi

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("slot", &NodeTypes::slot, "the grad_fn type (its slot) for an operator's backward name");
  m.def("recorder", &recorder, "recorder(k, kernel, adjoint)(x): kernel(x), recorded for autograd with adjoint "
                               "as its backward");
  m.def("eager_check", &eager_check,
        "eager_check(state, config_globals, sys_dict, fallback)(): the eager entries' check, in C++");
  m.def("register_ops", &register_ops, "CPU, CUDA and Autograd kernels for operators of a namespace");
  m.def("torch_api", &tapi::capsule, "PyTorch's tensor accessors for the call cache (runtime/native/torch_api.h)");
  m.def("describe", &tapi::describe_py, "what torch_api's describe reads of a tensor, as a tuple (tests)");
}
