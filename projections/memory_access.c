/* A `MemoryState`'s get and put, one C call each (`projections.state` says what they do).

They are the in-process fold's commonest calls: a tavern event makes some 28 puts and 20 gets
(`rumourmill replay`, the tests, the projection core's benchmark). Written in Python, a put cost
about 1.1 us under the interpreter, a fifth of the core's time; here the same dict and set calls
are made, in the same order, with the same results.

The fields are the ones `MemoryState.__init__` assigns: member descriptors of the same names.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>

#define SPACE_END '\0'

typedef struct {
    PyObject_HEAD
    PyObject *data;       /* every value, by key (dict) */
    PyObject *spaces;     /* each key space's keys, by the space's name (dict of `_Space`) */
    PyObject *new_space;  /* makes an empty `_Space` (callable) */
} MemoryAccess;

static PyObject *fresh_name;

static int check_bytes(PyObject *value, const char *what) {
    if (PyBytes_Check(value)) return 0;
    PyErr_Format(PyExc_TypeError, "a state %s is bytes, not %.100s", what, Py_TYPE(value)->tp_name);
    return -1;
}

static int check_fields(MemoryAccess *self) {
    if (self->data != NULL && PyDict_CheckExact(self->data) && self->spaces != NULL &&
        PyDict_CheckExact(self->spaces) && self->new_space != NULL)
        return 0;
    PyErr_SetString(PyExc_AttributeError, "MemoryAccess: a field is not set");
    return -1;
}

static PyObject *MemoryAccess_get(MemoryAccess *self, PyObject *key) {
    if (check_bytes(key, "key") < 0 || check_fields(self) < 0) return NULL;
    PyObject *value = PyDict_GetItemWithError(self->data, key);
    if (value == NULL && PyErr_Occurred()) return NULL;
    return Py_NewRef(value == NULL ? Py_None : value);
}

/* Note a new `key` among the fresh keys of its space (`projections.state.space_of`), making the
space on its first key. */
static int note_fresh(MemoryAccess *self, PyObject *key) {
    const char *bytes = PyBytes_AS_STRING(key);
    Py_ssize_t size = PyBytes_GET_SIZE(key);
    const char *end = memchr(bytes, SPACE_END, (size_t)size);
    PyObject *name = end == NULL ? Py_NewRef(key) : PyBytes_FromStringAndSize(bytes, end - bytes + 1);
    if (name == NULL) return -1;
    int result = -1;
    PyObject *fresh = NULL;
    PyObject *space = Py_XNewRef(PyDict_GetItemWithError(self->spaces, name));
    if (space == NULL) {
        if (PyErr_Occurred()) goto done;
        space = PyObject_CallNoArgs(self->new_space);
        if (space == NULL || PyDict_SetItem(self->spaces, name, space) < 0) goto done;
    }
    fresh = PyObject_GetAttr(space, fresh_name);
    if (fresh == NULL) goto done;
    if (!PySet_Check(fresh)) {
        PyErr_SetString(PyExc_TypeError, "a key space's fresh keys are not a set");
        goto done;
    }
    result = PySet_Add(fresh, key);
done:
    Py_XDECREF(fresh);
    Py_XDECREF(space);
    Py_DECREF(name);
    return result;
}

static PyObject *MemoryAccess_put(MemoryAccess *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "put takes a key and a value (%zd given)", nargs);
        return NULL;
    }
    PyObject *key = args[0];
    if (check_bytes(key, "key") < 0 || check_bytes(args[1], "value") < 0) return NULL;
    if (check_fields(self) < 0) return NULL;
    int known = PyDict_Contains(self->data, key);
    if (known < 0 || (!known && note_fresh(self, key) < 0)) return NULL;
    /* `projections.state.kept`: in memory of its own length */
    PyObject *value = PyBytes_FromStringAndSize(PyBytes_AS_STRING(args[1]), PyBytes_GET_SIZE(args[1]));
    if (value == NULL) return NULL;
    int stored = PyDict_SetItem(self->data, key, value);
    Py_DECREF(value);
    return stored < 0 ? NULL : Py_NewRef(Py_None);
}

static int MemoryAccess_traverse(MemoryAccess *self, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->data);
    Py_VISIT(self->spaces);
    Py_VISIT(self->new_space);
    return 0;
}

static int MemoryAccess_clear(MemoryAccess *self) {
    Py_CLEAR(self->data);
    Py_CLEAR(self->spaces);
    Py_CLEAR(self->new_space);
    return 0;
}

static void MemoryAccess_dealloc(MemoryAccess *self) {
    PyObject_GC_UnTrack(self);
    MemoryAccess_clear(self);
    PyTypeObject *type = Py_TYPE(self);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static PyMemberDef MemoryAccess_members[] = {
    {"_data", T_OBJECT_EX, offsetof(MemoryAccess, data), 0, NULL},
    {"_spaces", T_OBJECT_EX, offsetof(MemoryAccess, spaces), 0, NULL},
    {"_new_space", T_OBJECT_EX, offsetof(MemoryAccess, new_space), 0, NULL},
    {NULL},
};

static PyMethodDef MemoryAccess_methods[] = {
    {"get", (PyCFunction)MemoryAccess_get, METH_O, "The value at `key`, or None."},
    {"put", (PyCFunction)(void (*)(void))MemoryAccess_put, METH_FASTCALL,
     "Set `key` to `value`; a new key waits among its space's fresh keys."},
    {NULL},
};

static PyType_Slot MemoryAccess_slots[] = {
    {Py_tp_doc, "A memory state's get and put, in C (`projections.state.MemoryState`)."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, MemoryAccess_dealloc},
    {Py_tp_traverse, MemoryAccess_traverse},
    {Py_tp_clear, MemoryAccess_clear},
    {Py_tp_members, MemoryAccess_members},
    {Py_tp_methods, MemoryAccess_methods},
    {0, NULL},
};

static PyType_Spec MemoryAccess_spec = {
    .name = "projections.memory_access.MemoryAccess",
    .basicsize = sizeof(MemoryAccess),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = MemoryAccess_slots,
};

static int exec_module(PyObject *module) {
    fresh_name = PyUnicode_InternFromString("fresh");
    if (fresh_name == NULL) return -1;
    PyObject *type = PyType_FromModuleAndSpec(module, &MemoryAccess_spec, NULL);
    if (type == NULL) return -1;
    return PyModule_AddObject(module, "MemoryAccess", type) < 0 ? (Py_DECREF(type), -1) : 0;
}

static PyModuleDef_Slot module_slots[] = {{Py_mod_exec, exec_module}, {0, NULL}};

static struct PyModuleDef memory_access_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "projections.memory_access",
    .m_doc = "A memory state's get and put, one C call each.",
    .m_size = 0,
    .m_slots = module_slots,
};

PyMODINIT_FUNC PyInit_memory_access(void) { return PyModuleDef_Init(&memory_access_module); }
