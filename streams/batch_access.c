/* A `BatchTransaction`'s get and put, one C call each (`streams.state` says what they do).

They are the ingest agent's commonest calls: an event of a town with rumours spreading makes
some 160 puts and as many gets. Written in Python, each was a dozen bytecodes around the dict
and RocksDB calls it makes (a put cost about 1.1 us, a third of it the interpreter); here the
same calls are made, in the same order, with the same results.

The fields are the ones `streams.state.RocksTransaction` and `BatchTransaction` assign in
their `__init__`: member descriptors of the same names, so the Python assigns them unchanged.
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>
#include <string.h>

#define SPACE_END '\0'

typedef struct {
    PyObject_HEAD
    PyObject *db;            /* the rocksdict database: get, put */
    PyObject *known;         /* the current generation of other values (dict) */
    PyObject *heads;         /* the current generation of heads (dict) */
    PyObject *earlier;       /* the previous generation of other values (dict) */
    PyObject *earlier_heads; /* the previous generation of heads (dict) */
    PyObject *head_spaces;   /* the packed spaces whose values are heads (frozenset) */
    PyObject *writes;        /* the partition's writes: `.event`, the current event's (dict) */
    PyObject *through;       /* the spaces written straight to the database (set) */
    PyObject *held;          /* the RocksDB write batch holding the rest: put */
} BatchAccess;

static PyObject *get_name, *put_name, *event_name;

/* The key space of `key` (its bytes up to the first SPACE_END, included; all of it if none):
`projections.state.space_of`. A new reference. */
static PyObject *space_of(PyObject *key) {
    const char *bytes = PyBytes_AS_STRING(key);
    Py_ssize_t size = PyBytes_GET_SIZE(key);
    const char *end = memchr(bytes, SPACE_END, (size_t)size);
    if (end == NULL) return Py_NewRef(key);
    return PyBytes_FromStringAndSize(bytes, end - bytes + 1);
}

static int check_bytes(PyObject *value, const char *what) {
    if (PyBytes_Check(value)) return 0;
    PyErr_Format(PyExc_TypeError, "a state %s is bytes, not %.100s", what, Py_TYPE(value)->tp_name);
    return -1;
}

static int check_dict(PyObject *field, const char *name) {
    if (field != NULL && PyDict_CheckExact(field)) return 0;
    PyErr_Format(PyExc_TypeError, "BatchAccess.%s is not a dict", name);
    return -1;
}

/* `db.get(key)` or `held.put(key, value)`, by name: a new reference. */
static PyObject *call_method(PyObject *target, PyObject *name, PyObject *key, PyObject *value) {
    PyObject *args[3] = {target, key, value};
    size_t count = value == NULL ? 2 : 3;
    return PyObject_VectorcallMethod(name, args, count | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
}

/* The value of `key` in `dict` (borrowed; NULL, no error set, when it has none). */
static PyObject *found_in(PyObject *dict, PyObject *key) { return PyDict_GetItemWithError(dict, key); }

static PyObject *BatchAccess_get(BatchAccess *self, PyObject *key) {
    if (check_bytes(key, "key") < 0) return NULL;
    if (self->known == NULL || self->known == Py_None) {
        if (self->db == NULL) goto unset;
        return call_method(self->db, get_name, key, NULL);
    }
    if (check_dict(self->known, "_known") < 0 || check_dict(self->heads, "_heads") < 0 ||
        check_dict(self->earlier, "_earlier") < 0 ||
        check_dict(self->earlier_heads, "_earlier_heads") < 0)
        return NULL;
    PyObject *value = found_in(self->known, key);
    if (value != NULL || PyErr_Occurred()) return Py_XNewRef(value);
    value = found_in(self->heads, key);
    if (value != NULL || PyErr_Occurred()) return Py_XNewRef(value);
    if (self->head_spaces == NULL || self->db == NULL) goto unset;
    PyObject *space = space_of(key);
    if (space == NULL) return NULL;
    int is_head = PySet_Contains(self->head_spaces, space);
    Py_DECREF(space);
    if (is_head < 0) return NULL;
    PyObject *into = is_head ? self->heads : self->known;
    value = found_in(is_head ? self->earlier_heads : self->earlier, key);
    if (value != NULL) {
        Py_INCREF(value);
    } else {
        if (PyErr_Occurred()) return NULL;
        value = call_method(self->db, get_name, key, NULL);
        if (value == NULL) return NULL;
    }
    if (PyDict_SetItem(into, key, value) < 0) {
        Py_DECREF(value);
        return NULL;
    }
    return value;
unset:
    PyErr_SetString(PyExc_AttributeError, "BatchAccess: a field is not set");
    return NULL;
}

/* `value` in memory of its own length: `projections.state.kept`. */
static PyObject *kept(PyObject *value) {
    return PyBytes_FromStringAndSize(PyBytes_AS_STRING(value), PyBytes_GET_SIZE(value));
}

static PyObject *BatchAccess_put(BatchAccess *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2) {
        PyErr_Format(PyExc_TypeError, "put takes a key and a value (%zd given)", nargs);
        return NULL;
    }
    PyObject *key = args[0];
    if (check_bytes(key, "key") < 0 || check_bytes(args[1], "value") < 0) return NULL;
    if (check_dict(self->known, "_known") < 0 || check_dict(self->heads, "_heads") < 0) return NULL;
    if (self->head_spaces == NULL || self->writes == NULL || self->through == NULL ||
        self->held == NULL || self->db == NULL) {
        PyErr_SetString(PyExc_AttributeError, "BatchAccess: a field is not set");
        return NULL;
    }
    PyObject *result = NULL, *event = NULL;
    PyObject *value = kept(args[1]);
    PyObject *space = value == NULL ? NULL : space_of(key);
    if (space == NULL) goto done;
    int is_head = PySet_Contains(self->head_spaces, space);
    if (is_head < 0) goto done;
    if (PyDict_SetItem(is_head ? self->heads : self->known, key, value) < 0) goto done;
    event = PyObject_GetAttr(self->writes, event_name);
    if (event == NULL || check_dict(event, "_writes.event") < 0) goto done;
    /* deleted and set again: the key moves to the end, in the order of last writes */
    int written = PyDict_Contains(event, key);
    if (written < 0 || (written && PyDict_DelItem(event, key) < 0)) goto done;
    if (PyDict_SetItem(event, key, value) < 0) goto done;
    int through = PySet_Contains(self->through, space);
    if (through < 0) goto done;
    result = call_method(through ? self->db : self->held, put_name, key, value);
done:
    Py_XDECREF(event);
    Py_XDECREF(space);
    Py_XDECREF(value);
    return result;
}

static int BatchAccess_traverse(BatchAccess *self, visitproc visit, void *arg) {
    Py_VISIT(Py_TYPE(self));
    Py_VISIT(self->db);
    Py_VISIT(self->known);
    Py_VISIT(self->heads);
    Py_VISIT(self->earlier);
    Py_VISIT(self->earlier_heads);
    Py_VISIT(self->head_spaces);
    Py_VISIT(self->writes);
    Py_VISIT(self->through);
    Py_VISIT(self->held);
    return 0;
}

static int BatchAccess_clear(BatchAccess *self) {
    Py_CLEAR(self->db);
    Py_CLEAR(self->known);
    Py_CLEAR(self->heads);
    Py_CLEAR(self->earlier);
    Py_CLEAR(self->earlier_heads);
    Py_CLEAR(self->head_spaces);
    Py_CLEAR(self->writes);
    Py_CLEAR(self->through);
    Py_CLEAR(self->held);
    return 0;
}

static void BatchAccess_dealloc(BatchAccess *self) {
    PyObject_GC_UnTrack(self);
    BatchAccess_clear(self);
    PyTypeObject *type = Py_TYPE(self);
    type->tp_free((PyObject *)self);
    Py_DECREF(type);
}

static PyMemberDef BatchAccess_members[] = {
    {"_db", T_OBJECT_EX, offsetof(BatchAccess, db), 0, NULL},
    {"_known", T_OBJECT_EX, offsetof(BatchAccess, known), 0, NULL},
    {"_heads", T_OBJECT_EX, offsetof(BatchAccess, heads), 0, NULL},
    {"_earlier", T_OBJECT_EX, offsetof(BatchAccess, earlier), 0, NULL},
    {"_earlier_heads", T_OBJECT_EX, offsetof(BatchAccess, earlier_heads), 0, NULL},
    {"_head_spaces", T_OBJECT_EX, offsetof(BatchAccess, head_spaces), 0, NULL},
    {"_writes", T_OBJECT_EX, offsetof(BatchAccess, writes), 0, NULL},
    {"_through", T_OBJECT_EX, offsetof(BatchAccess, through), 0, NULL},
    {"_held", T_OBJECT_EX, offsetof(BatchAccess, held), 0, NULL},
    {NULL},
};

static PyMethodDef BatchAccess_methods[] = {
    {"get", (PyCFunction)BatchAccess_get, METH_O,
     "The value of `key`: from the kept values, else the database (kept then)."},
    {"put", (PyCFunction)(void (*)(void))BatchAccess_put, METH_FASTCALL,
     "Set `key` to `value`: kept, in the event's writes, and held or written through."},
    {NULL},
};

static PyType_Slot BatchAccess_slots[] = {
    {Py_tp_doc, "A batch transaction's get and put, in C (`streams.state.BatchTransaction`)."},
    {Py_tp_new, PyType_GenericNew},
    {Py_tp_dealloc, BatchAccess_dealloc},
    {Py_tp_traverse, BatchAccess_traverse},
    {Py_tp_clear, BatchAccess_clear},
    {Py_tp_members, BatchAccess_members},
    {Py_tp_methods, BatchAccess_methods},
    {0, NULL},
};

static PyType_Spec BatchAccess_spec = {
    .name = "streams.batch_access.BatchAccess",
    .basicsize = sizeof(BatchAccess),
    .flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
    .slots = BatchAccess_slots,
};

static int exec_module(PyObject *module) {
    get_name = PyUnicode_InternFromString("get");
    put_name = PyUnicode_InternFromString("put");
    event_name = PyUnicode_InternFromString("event");
    if (get_name == NULL || put_name == NULL || event_name == NULL) return -1;
    PyObject *type = PyType_FromModuleAndSpec(module, &BatchAccess_spec, NULL);
    if (type == NULL) return -1;
    return PyModule_AddObject(module, "BatchAccess", type) < 0 ? (Py_DECREF(type), -1) : 0;
}

static PyModuleDef_Slot module_slots[] = {{Py_mod_exec, exec_module}, {0, NULL}};

static struct PyModuleDef batch_access_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "streams.batch_access",
    .m_doc = "A batch transaction's get and put, one C call each.",
    .m_size = 0,
    .m_slots = module_slots,
};

PyMODINIT_FUNC PyInit_batch_access(void) { return PyModuleDef_Init(&batch_access_module); }
