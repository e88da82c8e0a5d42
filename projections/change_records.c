/* The change feed's records, built in one call each (`projections.changes` says what they hold).

A record is a dozen small encodings spliced together, and an id hashed from where the change
happened. Written in Python, the calls between those steps cost four times the steps: the feed
took a sixth of the worker's time, over a dozen records an event. Here each record is one call.

`record((prefix, where), (kind_fields, packed_kind, names), one, other, values)` writes, byte
for byte, what `orjson.dumps` writes for the whole change:
  {"change_id":"<id>"<kind_fields><where><name><value>,...,<name><value>}
where <id> is the hex of the 16-byte BLAKE2b of `prefix` then `pack(kind, one, other)` (as
`projections.keys.pack` packs strings), so `change_id(tenant, world, timeline, seq, kind, one,
other)` in Python gives the same id. Values are encoded as orjson encodes them: strings escaped
as orjson escapes them, None, True and False, integers (past 64 bits signed, by orjson); floats
by orjson itself (its shortest form is its own), remembered; bytes are spliced in as they are
(fields encoded beforehand).
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

/* ---- BLAKE2b (RFC 7693), unkeyed, 16-byte digests ---- */

static const uint64_t BLAKE2B_IV[8] = {
    0x6a09e667f3bcc908ULL, 0xbb67ae8584caa73bULL, 0x3c6ef372fe94f82bULL,
    0xa54ff53a5f1d36f1ULL, 0x510e527fade682d1ULL, 0x9b05688c2b3e6c1fULL,
    0x1f83d9abfb41bd6bULL, 0x5be0cd19137e2179ULL};

static const uint8_t BLAKE2B_SIGMA[12][16] = {
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3},
    {11, 8, 12, 0, 5, 2, 15, 13, 10, 14, 3, 6, 7, 1, 9, 4},
    {7, 9, 3, 1, 13, 12, 11, 14, 2, 6, 5, 10, 4, 0, 15, 8},
    {9, 0, 5, 7, 2, 4, 10, 15, 14, 1, 11, 12, 6, 8, 3, 13},
    {2, 12, 6, 10, 0, 11, 8, 3, 4, 13, 7, 5, 15, 14, 1, 9},
    {12, 5, 1, 15, 14, 13, 4, 10, 0, 7, 6, 3, 9, 2, 8, 11},
    {13, 11, 7, 14, 12, 1, 3, 9, 5, 0, 15, 4, 8, 6, 2, 10},
    {6, 15, 14, 9, 11, 3, 0, 8, 12, 2, 13, 7, 1, 4, 10, 5},
    {10, 2, 8, 4, 7, 6, 1, 5, 15, 11, 9, 14, 3, 12, 13, 0},
    {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
    {14, 10, 4, 8, 9, 15, 13, 6, 1, 12, 0, 2, 11, 7, 5, 3}};

#define ROTR64(x, n) (((x) >> (n)) | ((x) << (64 - (n))))
#define BLAKE2B_G(a, b, c, d, x, y)     \
    do {                                \
        v[a] = v[a] + v[b] + (x);       \
        v[d] = ROTR64(v[d] ^ v[a], 32); \
        v[c] = v[c] + v[d];             \
        v[b] = ROTR64(v[b] ^ v[c], 24); \
        v[a] = v[a] + v[b] + (y);       \
        v[d] = ROTR64(v[d] ^ v[a], 16); \
        v[c] = v[c] + v[d];             \
        v[b] = ROTR64(v[b] ^ v[c], 63); \
    } while (0)

static uint64_t load64(const uint8_t *p) { /* a little-endian word */
    uint64_t w;
    memcpy(&w, p, sizeof w);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w;
}

#define BLAKE2B_ROUND(r)                                                   \
    do {                                                                   \
        BLAKE2B_G(0, 4, 8, 12, m[BLAKE2B_SIGMA[r][0]], m[BLAKE2B_SIGMA[r][1]]);   \
        BLAKE2B_G(1, 5, 9, 13, m[BLAKE2B_SIGMA[r][2]], m[BLAKE2B_SIGMA[r][3]]);   \
        BLAKE2B_G(2, 6, 10, 14, m[BLAKE2B_SIGMA[r][4]], m[BLAKE2B_SIGMA[r][5]]);  \
        BLAKE2B_G(3, 7, 11, 15, m[BLAKE2B_SIGMA[r][6]], m[BLAKE2B_SIGMA[r][7]]);  \
        BLAKE2B_G(0, 5, 10, 15, m[BLAKE2B_SIGMA[r][8]], m[BLAKE2B_SIGMA[r][9]]);  \
        BLAKE2B_G(1, 6, 11, 12, m[BLAKE2B_SIGMA[r][10]], m[BLAKE2B_SIGMA[r][11]]); \
        BLAKE2B_G(2, 7, 8, 13, m[BLAKE2B_SIGMA[r][12]], m[BLAKE2B_SIGMA[r][13]]);  \
        BLAKE2B_G(3, 4, 9, 14, m[BLAKE2B_SIGMA[r][14]], m[BLAKE2B_SIGMA[r][15]]);  \
    } while (0)

static void blake2b_compress(uint64_t h[8], const uint8_t block[128], uint64_t counted, int last) {
    uint64_t m[16], v[16];
    for (int i = 0; i < 16; i++) m[i] = load64(block + 8 * i);
    for (int i = 0; i < 8; i++) {
        v[i] = h[i];
        v[i + 8] = BLAKE2B_IV[i];
    }
    v[12] ^= counted;
    if (last) v[14] = ~v[14];
    /* unrolled, so each message word is picked at compile time */
    BLAKE2B_ROUND(0);
    BLAKE2B_ROUND(1);
    BLAKE2B_ROUND(2);
    BLAKE2B_ROUND(3);
    BLAKE2B_ROUND(4);
    BLAKE2B_ROUND(5);
    BLAKE2B_ROUND(6);
    BLAKE2B_ROUND(7);
    BLAKE2B_ROUND(8);
    BLAKE2B_ROUND(9);
    BLAKE2B_ROUND(10);
    BLAKE2B_ROUND(11);
    for (int i = 0; i < 8; i++) h[i] ^= v[i] ^ v[i + 8];
}

#define ID_BYTES 16

/* The 16-byte BLAKE2b of `in` (no key), as hex into `out` (32 characters). */
static void blake2b_hex(const uint8_t *in, size_t size, char out[2 * ID_BYTES]) {
    static const char HEX[] = "0123456789abcdef";
    uint64_t h[8];
    uint8_t block[128];
    memcpy(h, BLAKE2B_IV, sizeof h);
    h[0] ^= 0x01010000ULL ^ ID_BYTES;
    uint64_t counted = 0;
    while (size > 128) {
        counted += 128;
        blake2b_compress(h, in, counted, 0);
        in += 128;
        size -= 128;
    }
    memset(block, 0, sizeof block);
    memcpy(block, in, size);
    blake2b_compress(h, block, counted + size, 1);
    for (int i = 0; i < ID_BYTES; i++) {
        uint8_t byte = (uint8_t)(h[i / 8] >> (8 * (i % 8)));
        out[2 * i] = HEX[byte >> 4];
        out[2 * i + 1] = HEX[byte & 15];
    }
}

/* ---- a growing byte buffer ---- */

typedef struct {
    char *data;
    Py_ssize_t size, room;
    char inline_data[1024];
} Buffer;

static void buffer_init(Buffer *buffer) {
    buffer->data = buffer->inline_data;
    buffer->size = 0;
    buffer->room = sizeof buffer->inline_data;
}

static void buffer_free(Buffer *buffer) {
    if (buffer->data != buffer->inline_data) PyMem_Free(buffer->data);
}

static int buffer_reserve(Buffer *buffer, Py_ssize_t more) {
    if (buffer->size + more <= buffer->room) return 0;
    if (more > PY_SSIZE_T_MAX / 2 - buffer->size) {
        PyErr_NoMemory();
        return -1;
    }
    Py_ssize_t room = 2 * (buffer->size + more);
    char *data = PyMem_Malloc((size_t)room);
    if (data == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    memcpy(data, buffer->data, (size_t)buffer->size);
    buffer_free(buffer);
    buffer->data = data;
    buffer->room = room;
    return 0;
}

static int append(Buffer *buffer, const char *bytes, Py_ssize_t size) {
    if (buffer_reserve(buffer, size) < 0) return -1;
    memcpy(buffer->data + buffer->size, bytes, (size_t)size);
    buffer->size += size;
    return 0;
}

static int append_bytes(Buffer *buffer, PyObject *bytes) {
    return append(buffer, PyBytes_AS_STRING(bytes), PyBytes_GET_SIZE(bytes));
}

/* `text` as UTF-8 (its `size` in bytes), with room in `buffer` for `most_per_byte` bytes for
   each of its bytes and two more: what packing (NUL escaped) or quoting (\u00XX) can make of it.
   NULL, with the error set, when it has no UTF-8 form or the room cannot be had. */
static const char *utf8_with_room(Buffer *buffer, PyObject *text, Py_ssize_t most_per_byte,
                                  Py_ssize_t *size) {
    const char *utf8 = PyUnicode_AsUTF8AndSize(text, size);
    if (utf8 == NULL) return NULL;
    if (*size > (PY_SSIZE_T_MAX - 2) / most_per_byte) {
        PyErr_NoMemory();
        return NULL;
    }
    return buffer_reserve(buffer, most_per_byte * *size + 2) < 0 ? NULL : utf8;
}

/* A string as `projections.keys.pack` packs it: tag, UTF-8 with NUL escaped, NUL. */
static int append_packed(Buffer *buffer, PyObject *text) {
    Py_ssize_t size;
    const char *utf8 = utf8_with_room(buffer, text, 2, &size);
    if (utf8 == NULL) return -1;
    char *out = buffer->data + buffer->size;
    *out++ = '\x02';
    for (Py_ssize_t i = 0; i < size; i++) {
        *out++ = utf8[i];
        if (utf8[i] == '\0') *out++ = '\xff';
    }
    *out++ = '\0';
    buffer->size = out - buffer->data;
    return 0;
}

/* A string as orjson encodes it: quoted; quote, backslash and control characters escaped. */
static int append_json_string(Buffer *buffer, PyObject *text) {
    static const char HEX[] = "0123456789abcdef";
    Py_ssize_t size;
    const char *utf8 = utf8_with_room(buffer, text, 6, &size);
    if (utf8 == NULL) return -1;
    char *out = buffer->data + buffer->size;
    *out++ = '"';
    Py_ssize_t copied = 0; /* what is before it has been copied: runs that need no escape */
    for (Py_ssize_t i = 0; i < size; i++) {
        unsigned char c = (unsigned char)utf8[i];
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        memcpy(out, utf8 + copied, (size_t)(i - copied));
        out += i - copied;
        copied = i + 1;
        *out++ = '\\';
        switch (c) {
            case '"': *out++ = '"'; break;
            case '\\': *out++ = '\\'; break;
            case '\b': *out++ = 'b'; break;
            case '\t': *out++ = 't'; break;
            case '\n': *out++ = 'n'; break;
            case '\f': *out++ = 'f'; break;
            case '\r': *out++ = 'r'; break;
            default:
                *out++ = 'u';
                *out++ = '0';
                *out++ = '0';
                *out++ = HEX[c >> 4];
                *out++ = HEX[c & 15];
        }
    }
    memcpy(out, utf8 + copied, (size_t)(size - copied));
    out += size - copied;
    *out++ = '"';
    buffer->size = out - buffer->data;
    return 0;
}

/* ---- values ---- */

#define MOST_FLOATS_KEPT 65536

typedef struct {
    PyObject *dumps;  /* orjson.dumps */
    PyObject *floats; /* float -> its encoding: feelings and confidences recur */
} ModuleState;

/* Remembers `encoded` for `value` in bytes of its own length: orjson (3.12 on) hands each
   document back in a buffer of 4 KB or more, which 65,536 kept floats would hold whole
   (270 MB for a world of tuned policies). */
static int keep_float(ModuleState *state, PyObject *value, PyObject *encoded) {
    PyObject *own =
        PyBytes_FromStringAndSize(PyBytes_AS_STRING(encoded), PyBytes_GET_SIZE(encoded));
    if (own == NULL) return -1;
    int failed = PyDict_SetItem(state->floats, value, own) < 0;
    Py_DECREF(own);
    return failed ? -1 : 0;
}

/* `value` as orjson.dumps writes it (or refuses it), remembered in `floats` when `kept`. */
static int append_dumped(Buffer *buffer, ModuleState *state, PyObject *value, int kept) {
    PyObject *encoded = PyObject_CallOneArg(state->dumps, value);
    if (encoded == NULL) return -1;
    if (!PyBytes_Check(encoded)) {
        Py_DECREF(encoded);
        PyErr_SetString(PyExc_TypeError, "orjson.dumps gave no bytes");
        return -1;
    }
    int failed = kept && PyDict_GET_SIZE(state->floats) < MOST_FLOATS_KEPT &&
                 keep_float(state, value, encoded) < 0;
    failed = failed || append_bytes(buffer, encoded) < 0;
    Py_DECREF(encoded);
    return failed ? -1 : 0;
}

static int append_float(Buffer *buffer, ModuleState *state, PyObject *number) {
    double exact = PyFloat_AS_DOUBLE(number);
    /* 0.0 and -0.0 are one key to a dict, NaN none, and a subclass equals its plain float:
       none of them is remembered */
    int kept = PyFloat_CheckExact(number) && exact != 0.0 && exact == exact;
    PyObject *encoded = kept ? PyDict_GetItemWithError(state->floats, number) : NULL;
    if (encoded != NULL) return append_bytes(buffer, encoded);
    if (PyErr_Occurred()) return -1;
    return append_dumped(buffer, state, number, kept);
}

static int append_integer(Buffer *buffer, ModuleState *state, PyObject *integer) {
    int overflow;
    long long number = PyLong_AsLongLongAndOverflow(integer, &overflow);
    if (overflow) return append_dumped(buffer, state, integer, 0); /* orjson's own limits */
    if (number == -1 && PyErr_Occurred()) return -1;
    char digits[24], *start = digits + sizeof digits;
    unsigned long long rest =
        number < 0 ? 0ULL - (unsigned long long)number : (unsigned long long)number;
    do {
        *--start = (char)('0' + rest % 10);
        rest /= 10;
    } while (rest);
    if (number < 0) *--start = '-';
    return append(buffer, start, digits + sizeof digits - start);
}

static int append_value(Buffer *buffer, ModuleState *state, PyObject *value) {
    if (PyUnicode_Check(value)) return append_json_string(buffer, value);
    if (value == Py_None) return append(buffer, "null", 4);
    if (value == Py_True) return append(buffer, "true", 4);
    if (value == Py_False) return append(buffer, "false", 5);
    if (PyLong_Check(value)) return append_integer(buffer, state, value);
    if (PyFloat_Check(value)) return append_float(buffer, state, value);
    if (PyBytes_Check(value)) return append_bytes(buffer, value);
    PyErr_Format(PyExc_TypeError, "a change's field cannot be %.100s", Py_TYPE(value)->tp_name);
    return -1;
}

/* ---- record ---- */

static PyObject *record(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 5) {
        PyErr_Format(PyExc_TypeError, "record() takes 5 arguments (%zd given)", nargs);
        return NULL;
    }
    PyObject *position = args[0], *shape = args[1], *one = args[2], *other = args[3];
    PyObject *values = args[4];
    if (!PyTuple_Check(position) || PyTuple_GET_SIZE(position) != 2 || !PyTuple_Check(shape) ||
        PyTuple_GET_SIZE(shape) != 3) {
        PyErr_SetString(PyExc_TypeError, "position: (prefix, where); shape: (kind_fields, "
                                         "packed_kind, names)");
        return NULL;
    }
    PyObject *prefix = PyTuple_GET_ITEM(position, 0), *where = PyTuple_GET_ITEM(position, 1);
    PyObject *kind_fields = PyTuple_GET_ITEM(shape, 0), *packed_kind = PyTuple_GET_ITEM(shape, 1);
    PyObject *names = PyTuple_GET_ITEM(shape, 2);
    if (!PyBytes_Check(prefix) || !PyBytes_Check(where) || !PyBytes_Check(kind_fields) ||
        !PyBytes_Check(packed_kind)) {
        PyErr_SetString(PyExc_TypeError, "prefix, where, kind_fields, packed_kind: bytes");
        return NULL;
    }
    if (!PyUnicode_Check(one) || !PyUnicode_Check(other)) {
        PyErr_SetString(PyExc_TypeError, "one, other: str");
        return NULL;
    }
    if (!PyTuple_Check(names) || !PyTuple_Check(values) ||
        PyTuple_GET_SIZE(names) != PyTuple_GET_SIZE(values) || PyTuple_GET_SIZE(names) == 0) {
        PyErr_SetString(PyExc_TypeError, "names, values: tuples of one length, not empty");
        return NULL;
    }
    ModuleState *state = PyModule_GetState(module);
    Buffer buffer;
    buffer_init(&buffer);
    /* the id: hashed from the prefix and the subject, laid where the record will go */
    if (append_bytes(&buffer, prefix) < 0 || append_bytes(&buffer, packed_kind) < 0 ||
        append_packed(&buffer, one) < 0 || append_packed(&buffer, other) < 0)
        goto failed;
    char id[2 * ID_BYTES];
    blake2b_hex((const uint8_t *)buffer.data, (size_t)buffer.size, id);
    buffer.size = 0;
    if (append(&buffer, "{\"change_id\":\"", 14) < 0 || append(&buffer, id, sizeof id) < 0 ||
        append_bytes(&buffer, kind_fields) < 0 || append_bytes(&buffer, where) < 0)
        goto failed;
    Py_ssize_t fields = PyTuple_GET_SIZE(names);
    for (Py_ssize_t i = 0; i < fields; i++) {
        PyObject *name = PyTuple_GET_ITEM(names, i);
        if (!PyBytes_Check(name)) {
            PyErr_SetString(PyExc_TypeError, "names: bytes");
            goto failed;
        }
        if ((i > 0 && append(&buffer, ",", 1) < 0) || append_bytes(&buffer, name) < 0 ||
            append_value(&buffer, state, PyTuple_GET_ITEM(values, i)) < 0)
            goto failed;
    }
    if (append(&buffer, "}", 1) < 0) goto failed;
    PyObject *built = PyBytes_FromStringAndSize(buffer.data, buffer.size);
    buffer_free(&buffer);
    return built;
failed:
    buffer_free(&buffer);
    return NULL;
}

/* ---- the module ---- */

static int module_exec(PyObject *module) {
    ModuleState *state = PyModule_GetState(module);
    PyObject *orjson = PyImport_ImportModule("orjson");
    if (orjson == NULL) return -1;
    state->dumps = PyObject_GetAttrString(orjson, "dumps");
    Py_DECREF(orjson);
    if (state->dumps == NULL) return -1;
    state->floats = PyDict_New();
    return state->floats == NULL ? -1 : 0;
}

static int module_traverse(PyObject *module, visitproc visit, void *arg) {
    ModuleState *state = PyModule_GetState(module);
    Py_VISIT(state->dumps);
    Py_VISIT(state->floats);
    return 0;
}

static int module_clear(PyObject *module) {
    ModuleState *state = PyModule_GetState(module);
    Py_CLEAR(state->dumps);
    Py_CLEAR(state->floats);
    return 0;
}

static void module_free(void *module) { module_clear((PyObject *)module); }

static PyMethodDef METHODS[] = {
    {"record", (PyCFunction)(void (*)(void))record, METH_FASTCALL,
     "record(position, shape, one, other, values) -> bytes\n\n"
     "The record of a change, as orjson encodes it whole (see the module's docstring)."},
    {NULL, NULL, 0, NULL}};

static PyModuleDef_Slot SLOTS[] = {{Py_mod_exec, module_exec}, {0, NULL}};

static struct PyModuleDef MODULE = {
    PyModuleDef_HEAD_INIT,
    .m_name = "projections.change_records",
    .m_doc = "The change feed's records, built in one call each.",
    .m_size = sizeof(ModuleState),
    .m_methods = METHODS,
    .m_slots = SLOTS,
    .m_traverse = module_traverse,
    .m_clear = module_clear,
    .m_free = module_free,
};

PyMODINIT_FUNC PyInit_change_records(void) { return PyModuleDef_Init(&MODULE); }
