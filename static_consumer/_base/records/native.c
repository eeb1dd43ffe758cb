/* static_consumer._base.records.native: the native Record (docs/benchmarks.md, "Record").

A Record is either *message-backed* or *value-backed*:

- message-backed: made by wrap() from a message the client handed out. It holds that message and its
  value, read when the record is made (the field nearly every consume loop reads, kept in a slot the
  interpreter reads without a call), and answers every other field by calling the message's accessor
  (offset(), key(), ...) when read, so a record costs one small allocation and no other field is read
  before the application reads it. Headers are converted on first read and kept. wrap() replaces the
  messages of the client's list in place.
- value-backed: made by Record(...) (users, tests, unpickling, _replace). It holds a tuple of its
  fields.

Records are not tracked by the garbage collector: a consume loop then allocates no more container
objects than the client's own messages, and the collector's young generation never fills up in it (a
collection per batch otherwise). A message-backed record refers to a message and the value that message
holds, which refer to strings and bytes, so it cannot be part of a reference cycle (any through the
value would pass through the message too); a value-backed record whose fields are not
all plain values (a list, say, that might refer back to it) is made as the GC-tracked subtype instead.

This module imports no client library: it calls the methods of the objects it is given. Message
accessors are looked up once on the message type and called directly when they are plain C methods
without arguments (otherwise, and for any other type, through a normal method call).
*/
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h>

enum { F_TOPIC, F_PARTITION, F_OFFSET, F_KEY, F_VALUE, F_TIMESTAMP_MS, F_TIMESTAMP_TYPE, F_HEADERS, NFIELDS };
static const char *const FIELD_NAMES[NFIELDS] = {
    "topic", "partition", "offset", "key", "value", "timestamp_ms", "timestamp_type", "headers"};

enum { M_ERROR, M_TOPIC, M_PARTITION, M_OFFSET, M_KEY, M_VALUE, M_TIMESTAMP, M_HEADERS, NMETHODS };
static const char *const METHOD_NAMES[NMETHODS] = {
    "error", "topic", "partition", "offset", "key", "value", "timestamp", "headers"};

/* librdkafka's RD_KAFKA_TIMESTAMP_NOT_AVAILABLE (confluent_kafka.TIMESTAMP_NOT_AVAILABLE; a unit test
   pins that they agree): timestamp_ms is None for it. */
#define TIMESTAMP_NOT_AVAILABLE 0

typedef struct {
    PyObject_HEAD
    PyObject *value;   /* the value field, of either kind: a slot (see Record_members) */
    PyObject *msg;     /* message-backed: the client's message; NULL when value-backed */
    PyObject *fields;  /* value-backed: a tuple of NFIELDS; NULL when message-backed */
    PyObject *headers; /* message-backed: the headers once read; NULL until then */
} RecordObject;

static PyTypeObject RecordType;
static PyTypeObject TrackedRecordType;

#define Record_Check(o) PyObject_TypeCheck((o), &RecordType)

static PyObject *method_names[NMETHODS];
static PyObject *field_names; /* tuple of str: _fields and __match_args__ */
static PyObject *empty_tuple;
static PyObject *topic_partition_type; /* TopicPartition (static_consumer._base.records.partition), looked up when first used */

/* -- calling the message's accessors ---------------------------------------------------------------- */

typedef PyObject *(*NoArgs)(PyObject *, PyObject *);
static PyTypeObject *direct_type;      /* the message type whose accessors are in direct[] */
static NoArgs direct[NMETHODS];

/* Look the accessors up on `type`; keep them when every one is a plain C method without arguments. */
static void learn_type(PyTypeObject *type) {
    NoArgs found[NMETHODS];
    if (direct_type != NULL) return;
    for (int i = 0; i < NMETHODS; i++) {
        PyObject *descr = PyObject_GetAttr((PyObject *)type, method_names[i]);
        if (descr == NULL) {
            PyErr_Clear();
            return;
        }
        int ok = Py_IS_TYPE(descr, &PyMethodDescr_Type);
        if (ok) {
            PyMethodDescrObject *md = (PyMethodDescrObject *)descr;
            int flags = md->d_method->ml_flags;
            ok = PyType_IsSubtype(type, md->d_common.d_type) &&
                 (flags & (METH_VARARGS | METH_KEYWORDS | METH_NOARGS | METH_O | METH_FASTCALL |
                           METH_CLASS | METH_STATIC | METH_METHOD)) == METH_NOARGS;
            if (ok) found[i] = (NoArgs)(void (*)(void))md->d_method->ml_meth;
        }
        Py_DECREF(descr);
        if (!ok) return;
    }
    memcpy(direct, found, sizeof(found));
    Py_INCREF(type); /* kept for good: the functions above belong to it */
    direct_type = type;
}

static inline PyObject *call(PyObject *msg, int method) {
    if (Py_TYPE(msg) == direct_type) return direct[method](msg, NULL);
    PyObject *stack[2] = {NULL, msg};
    return PyObject_VectorcallMethod(method_names[method], stack + 1, 1 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                     NULL);
}

/* A key or value as bytes (a consumer with deserializers could hand out str). Steals `v`. */
static PyObject *as_bytes(PyObject *v) {
    if (v != NULL && PyUnicode_Check(v)) {
        PyObject *b = PyUnicode_AsUTF8String(v);
        Py_DECREF(v);
        return b;
    }
    return v;
}

/* The client's headers (None, a list of (name, value) pairs or a dict) as a tuple of (name, bytes or
   None) pairs. Steals `raw`. */
static PyObject *as_headers(PyObject *raw) {
    if (raw == NULL) return NULL;
    if (raw == Py_None) {
        Py_DECREF(raw);
        Py_INCREF(empty_tuple);
        return empty_tuple;
    }
    PyObject *items = PyDict_Check(raw) ? PyDict_Items(raw) : PySequence_List(raw);
    Py_DECREF(raw);
    if (items == NULL) return NULL;
    Py_ssize_t n = PyList_GET_SIZE(items);
    PyObject *out = PyTuple_New(n);
    if (out == NULL) goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PySequence_Tuple(PyList_GET_ITEM(items, i));
        if (pair == NULL) goto fail;
        if (PyTuple_GET_SIZE(pair) != 2) {
            PyErr_Format(PyExc_ValueError, "a header is a (name, value) pair, got %zd items",
                         PyTuple_GET_SIZE(pair));
            Py_DECREF(pair);
            goto fail;
        }
        PyObject *name = PyTuple_GET_ITEM(pair, 0), *value = PyTuple_GET_ITEM(pair, 1);
        Py_INCREF(value);
        value = as_bytes(value);
        if (value == NULL) {
            Py_DECREF(pair);
            goto fail;
        }
        Py_INCREF(name);
        Py_DECREF(pair);
        PyObject *converted = PyTuple_New(2);
        if (converted == NULL) {
            Py_DECREF(name);
            Py_DECREF(value);
            goto fail;
        }
        PyTuple_SET_ITEM(converted, 0, name);
        PyTuple_SET_ITEM(converted, 1, value);
        PyTuple_SET_ITEM(out, i, converted);
    }
    Py_DECREF(items);
    return out;
fail:
    Py_XDECREF(out);
    Py_DECREF(items);
    return NULL;
}

/* -- fields ----------------------------------------------------------------------------------------- */

/* Field `index` of a message-backed record (a new reference). */
static PyObject *message_field(RecordObject *self, int index) {
    PyObject *msg = self->msg, *stamp, *got;
    switch (index) {
    case F_TOPIC:
        return call(msg, M_TOPIC);
    case F_PARTITION:
        return call(msg, M_PARTITION);
    case F_OFFSET:
        return call(msg, M_OFFSET);
    case F_KEY:
        return as_bytes(call(msg, M_KEY));
    case F_VALUE:
        Py_INCREF(self->value);
        return self->value;
    case F_TIMESTAMP_MS:
    case F_TIMESTAMP_TYPE:
        stamp = call(msg, M_TIMESTAMP);
        if (stamp == NULL) return NULL;
        if (!PyTuple_Check(stamp) || PyTuple_GET_SIZE(stamp) != 2) {
            Py_DECREF(stamp);
            PyErr_SetString(PyExc_TypeError, "timestamp() did not return a (type, timestamp) pair");
            return NULL;
        }
        got = PyTuple_GET_ITEM(stamp, index == F_TIMESTAMP_TYPE ? 0 : 1);
        if (index == F_TIMESTAMP_MS) {
            long type = PyLong_AsLong(PyTuple_GET_ITEM(stamp, 0));
            if (type == -1 && PyErr_Occurred()) {
                Py_DECREF(stamp);
                return NULL;
            }
            if (type == TIMESTAMP_NOT_AVAILABLE) got = Py_None;
        }
        Py_INCREF(got);
        Py_DECREF(stamp);
        return got;
    default: /* F_HEADERS */
        if (self->headers == NULL) {
            self->headers = as_headers(call(msg, M_HEADERS));
            if (self->headers == NULL) return NULL;
        }
        Py_INCREF(self->headers);
        return self->headers;
    }
}

static inline PyObject *field(RecordObject *self, int index) {
    if (self->fields != NULL) {
        PyObject *v = PyTuple_GET_ITEM(self->fields, index);
        Py_INCREF(v);
        return v;
    }
    return message_field(self, index);
}

/* All fields as a tuple (a new reference). */
static PyObject *as_tuple(RecordObject *self) {
    if (self->fields != NULL) {
        Py_INCREF(self->fields);
        return self->fields;
    }
    PyObject *t = PyTuple_New(NFIELDS);
    if (t == NULL) return NULL;
    for (int i = 0; i < NFIELDS; i++) {
        PyObject *v = message_field(self, i);
        if (v == NULL) {
            Py_DECREF(t);
            return NULL;
        }
        PyTuple_SET_ITEM(t, i, v);
    }
    return t;
}

/* A Record or a tuple as a tuple; NULL without an exception for anything else. */
static PyObject *tuple_of(PyObject *o) {
    if (Record_Check(o)) return as_tuple((RecordObject *)o);
    if (PyTuple_Check(o)) {
        Py_INCREF(o);
        return o;
    }
    return NULL;
}

static PyObject *get_field(RecordObject *self, void *index) { return field(self, (int)(intptr_t)index); }

static PyObject *get_topic_partition(RecordObject *self, void *unused) {
    if (topic_partition_type == NULL) {
        PyObject *module = PyImport_ImportModule("static_consumer._base.records.partition");
        if (module == NULL) return NULL;
        topic_partition_type = PyObject_GetAttrString(module, "TopicPartition");
        Py_DECREF(module);
        if (topic_partition_type == NULL) return NULL;
    }
    PyObject *args[3] = {NULL, field(self, F_TOPIC), NULL};
    if (args[1] == NULL) return NULL;
    args[2] = field(self, F_PARTITION);
    if (args[2] == NULL) {
        Py_DECREF(args[1]);
        return NULL;
    }
    PyObject *tp = PyObject_Vectorcall(topic_partition_type, args + 1, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL);
    Py_DECREF(args[1]);
    Py_DECREF(args[2]);
    return tp;
}

/* -- construction and lifetime ---------------------------------------------------------------------- */

/* The memory of recently freed records, kept for the next batch (a consume loop frees one batch of
   records as it makes the next): a list linked through `msg`, at most FREE_MAX long. */
#define FREE_MAX 2048
static RecordObject *free_head;
static int free_count;

/* A message-backed record of `msg` (the reference is the caller's to give, and stays the caller's when
   NULL is returned). */
static inline RecordObject *new_record(PyObject *msg) {
    PyObject *value = as_bytes(call(msg, M_VALUE));
    if (value == NULL) return NULL;
    RecordObject *record = free_head;
    if (record != NULL) {
        free_head = (RecordObject *)record->msg;
        free_count--;
        PyObject_Init((PyObject *)record, &RecordType);
    } else {
        record = PyObject_New(RecordObject, &RecordType);
        if (record == NULL) {
            Py_DECREF(value);
            return NULL;
        }
    }
    record->value = value;
    record->msg = msg;
    record->fields = NULL;
    record->headers = NULL;
    return record;
}

/* A value that cannot refer to anything (so a record holding only such values is in no cycle). */
static int plain(PyObject *v) {
    return v == Py_None || PyLong_CheckExact(v) || PyUnicode_CheckExact(v) || PyBytes_CheckExact(v) ||
           PyBool_Check(v) || PyFloat_CheckExact(v);
}

static int plain_fields(PyObject *fields) {
    for (int i = 0; i < F_HEADERS; i++)
        if (!plain(PyTuple_GET_ITEM(fields, i))) return 0;
    PyObject *headers = PyTuple_GET_ITEM(fields, F_HEADERS);
    if (!PyTuple_CheckExact(headers)) return 0;
    for (Py_ssize_t i = 0; i < PyTuple_GET_SIZE(headers); i++) {
        PyObject *pair = PyTuple_GET_ITEM(headers, i);
        if (!PyTuple_CheckExact(pair)) return 0;
        for (Py_ssize_t j = 0; j < PyTuple_GET_SIZE(pair); j++)
            if (!plain(PyTuple_GET_ITEM(pair, j))) return 0;
    }
    return 1;
}

/* A value-backed record of `type` (or of the tracked subtype when its fields need it). Steals `fields`. */
static PyObject *from_fields(PyTypeObject *type, PyObject *fields) {
    if (type == &RecordType && !plain_fields(fields)) type = &TrackedRecordType;
    RecordObject *self = (RecordObject *)type->tp_alloc(type, 0);
    if (self == NULL) {
        Py_DECREF(fields);
        return NULL;
    }
    self->fields = fields; /* msg and headers are NULL (tp_alloc zeroes) */
    self->value = PyTuple_GET_ITEM(fields, F_VALUE);
    Py_INCREF(self->value);
    return (PyObject *)self;
}

static PyObject *Record_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    static char *kwlist[] = {"topic", "partition", "offset", "key", "value", "timestamp_ms",
                             "timestamp_type", "headers", NULL};
    PyObject *f[NFIELDS];
    f[F_HEADERS] = empty_tuple;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "OOOOOOO|O:Record", kwlist, &f[0], &f[1], &f[2], &f[3], &f[4],
                                     &f[5], &f[6], &f[7]))
        return NULL;
    PyObject *fields = PyTuple_New(NFIELDS);
    if (fields == NULL) return NULL;
    for (int i = 0; i < NFIELDS; i++) {
        Py_INCREF(f[i]);
        PyTuple_SET_ITEM(fields, i, f[i]);
    }
    return from_fields(type, fields);
}

static void Record_dealloc(RecordObject *self) {
    Py_XDECREF(self->value);
    Py_XDECREF(self->msg);
    Py_XDECREF(self->fields);
    Py_XDECREF(self->headers);
    if (Py_IS_TYPE(self, &RecordType) && free_count < FREE_MAX) {
        self->msg = (PyObject *)free_head;
        free_head = self;
        free_count++;
        return;
    }
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int Tracked_traverse(RecordObject *self, visitproc visit, void *arg) {
    Py_VISIT(self->value);
    Py_VISIT(self->msg);
    Py_VISIT(self->fields);
    Py_VISIT(self->headers);
    return 0;
}

static int Tracked_clear(RecordObject *self) {
    Py_CLEAR(self->value);
    Py_CLEAR(self->msg);
    Py_CLEAR(self->fields);
    Py_CLEAR(self->headers);
    return 0;
}

static void Tracked_dealloc(RecordObject *self) {
    PyObject_GC_UnTrack(self);
    Tracked_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

/* -- comparison, hashing, repr ---------------------------------------------------------------------- */

static PyObject *Record_richcompare(PyObject *a, PyObject *b, int op) {
    PyObject *ta = tuple_of(a);
    if (ta == NULL) {
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyObject *tb = tuple_of(b);
    if (tb == NULL) {
        Py_DECREF(ta);
        if (PyErr_Occurred()) return NULL;
        Py_RETURN_NOTIMPLEMENTED;
    }
    PyObject *result = PyObject_RichCompare(ta, tb, op);
    Py_DECREF(ta);
    Py_DECREF(tb);
    return result;
}

static Py_hash_t Record_hash(RecordObject *self) {
    PyObject *t = as_tuple(self);
    if (t == NULL) return -1;
    Py_hash_t h = PyObject_Hash(t);
    Py_DECREF(t);
    return h;
}

static PyObject *Record_repr(RecordObject *self) {
    PyObject *t = as_tuple(self), *name = NULL, *result = NULL;
    if (t == NULL) return NULL;
    name = PyType_GetName(Py_TYPE(self));
    if (name != NULL)
        result = PyUnicode_FromFormat(
            "%U(topic=%R, partition=%R, offset=%R, key=%R, value=%R, timestamp_ms=%R, timestamp_type=%R, "
            "headers=%R)",
            name, PyTuple_GET_ITEM(t, 0), PyTuple_GET_ITEM(t, 1), PyTuple_GET_ITEM(t, 2), PyTuple_GET_ITEM(t, 3),
            PyTuple_GET_ITEM(t, 4), PyTuple_GET_ITEM(t, 5), PyTuple_GET_ITEM(t, 6), PyTuple_GET_ITEM(t, 7));
    Py_XDECREF(name);
    Py_DECREF(t);
    return result;
}

/* -- the sequence protocol, as a tuple of the fields ------------------------------------------------ */

static Py_ssize_t Record_length(PyObject *self) { return NFIELDS; }

static PyObject *Record_item(RecordObject *self, Py_ssize_t i) {
    if (i < 0 || i >= NFIELDS) {
        PyErr_SetString(PyExc_IndexError, "tuple index out of range");
        return NULL;
    }
    return field(self, (int)i);
}

static PyObject *Record_subscript(RecordObject *self, PyObject *key) {
    if (PyIndex_Check(key)) {
        Py_ssize_t i = PyNumber_AsSsize_t(key, PyExc_IndexError);
        if (i == -1 && PyErr_Occurred()) return NULL;
        return Record_item(self, i < 0 ? i + NFIELDS : i);
    }
    PyObject *t = as_tuple(self);
    if (t == NULL) return NULL;
    PyObject *result = PyObject_GetItem(t, key);
    Py_DECREF(t);
    return result;
}

static int Record_contains(RecordObject *self, PyObject *value) {
    PyObject *t = as_tuple(self);
    if (t == NULL) return -1;
    int found = PySequence_Contains(t, value);
    Py_DECREF(t);
    return found;
}

static PyObject *Record_iter(RecordObject *self) {
    PyObject *t = as_tuple(self);
    if (t == NULL) return NULL;
    PyObject *it = PyObject_GetIter(t);
    Py_DECREF(t);
    return it;
}

/* record + tuple, tuple + record, record * n, n * record: tuples, as for a named tuple. */
static PyObject *Record_add(PyObject *a, PyObject *b) {
    if (!(Record_Check(a) || PyTuple_Check(a)) || !(Record_Check(b) || PyTuple_Check(b)))
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *ta = tuple_of(a);
    if (ta == NULL) return NULL;
    PyObject *tb = tuple_of(b);
    if (tb == NULL) {
        Py_DECREF(ta);
        return NULL;
    }
    PyObject *result = PySequence_Concat(ta, tb);
    Py_DECREF(ta);
    Py_DECREF(tb);
    return result;
}

static PyObject *Record_multiply(PyObject *a, PyObject *b) {
    PyObject *record = Record_Check(a) ? a : b, *times = record == a ? b : a;
    if (!PyIndex_Check(times)) Py_RETURN_NOTIMPLEMENTED;
    Py_ssize_t n = PyNumber_AsSsize_t(times, PyExc_OverflowError);
    if (n == -1 && PyErr_Occurred()) return NULL;
    PyObject *t = as_tuple((RecordObject *)record);
    if (t == NULL) return NULL;
    PyObject *result = PySequence_Repeat(t, n);
    Py_DECREF(t);
    return result;
}

/* -- methods ---------------------------------------------------------------------------------------- */

static PyObject *Record_asdict(RecordObject *self, PyObject *unused) {
    PyObject *t = as_tuple(self);
    if (t == NULL) return NULL;
    PyObject *d = PyDict_New();
    for (int i = 0; d != NULL && i < NFIELDS; i++) {
        if (PyDict_SetItem(d, PyTuple_GET_ITEM(field_names, i), PyTuple_GET_ITEM(t, i)) < 0) Py_CLEAR(d);
    }
    Py_DECREF(t);
    return d;
}

/* The type a copy of `self` is made as: its own, unless that is the tracked subtype (chosen again). */
static PyTypeObject *copy_type(PyObject *self) {
    return Py_IS_TYPE(self, &TrackedRecordType) ? &RecordType : Py_TYPE(self);
}

static PyObject *Record_replace(RecordObject *self, PyObject *args, PyObject *kwds) {
    if (PyTuple_GET_SIZE(args) != 0) {
        PyErr_SetString(PyExc_TypeError, "_replace() takes field names as keywords only");
        return NULL;
    }
    PyObject *t = as_tuple(self);
    if (t == NULL) return NULL;
    PyObject *fields = PySequence_List(t);
    Py_DECREF(t);
    if (fields == NULL) return NULL;
    Py_ssize_t used = 0;
    for (int i = 0; kwds != NULL && i < NFIELDS; i++) {
        PyObject *v = PyDict_GetItemWithError(kwds, PyTuple_GET_ITEM(field_names, i));
        if (v == NULL && PyErr_Occurred()) goto fail;
        if (v != NULL) {
            Py_INCREF(v);
            PyList_SetItem(fields, i, v);
            used++;
        }
    }
    if (kwds != NULL && used != PyDict_GET_SIZE(kwds)) {
        PyObject *unknown = PyList_New(0), *key, *value;
        Py_ssize_t pos = 0;
        while (unknown != NULL && PyDict_Next(kwds, &pos, &key, &value)) {
            int known = PySequence_Contains(field_names, key);
            if (known < 0 || (!known && PyList_Append(unknown, key) < 0)) Py_CLEAR(unknown);
        }
        if (unknown != NULL) {
            PyErr_Format(PyExc_ValueError, "Got unexpected field names: %R", unknown);
            Py_DECREF(unknown);
        }
        goto fail;
    }
    PyObject *values = PyList_AsTuple(fields);
    Py_DECREF(fields);
    if (values == NULL) return NULL;
    PyObject *copy = PyObject_Call((PyObject *)copy_type((PyObject *)self), values, NULL);
    Py_DECREF(values);
    return copy;
fail:
    Py_DECREF(fields);
    return NULL;
}

static PyObject *Record_make(PyObject *cls, PyObject *iterable) {
    PyObject *values = PySequence_Tuple(iterable);
    if (values == NULL) return NULL;
    if (PyTuple_GET_SIZE(values) != NFIELDS) {
        PyErr_Format(PyExc_TypeError, "Expected %d arguments, got %zd", NFIELDS, PyTuple_GET_SIZE(values));
        Py_DECREF(values);
        return NULL;
    }
    PyObject *made = PyObject_Call(cls, values, NULL);
    Py_DECREF(values);
    return made;
}

static PyObject *Record_getnewargs(RecordObject *self, PyObject *unused) { return as_tuple(self); }

static PyObject *Record_reduce(RecordObject *self, PyObject *unused) {
    PyObject *t = as_tuple(self);
    if (t == NULL) return NULL;
    return Py_BuildValue("(ON)", (PyObject *)copy_type((PyObject *)self), t);
}

static PyObject *Record_count(RecordObject *self, PyObject *value) {
    PyObject *t = as_tuple(self);
    if (t == NULL) return NULL;
    Py_ssize_t n = PySequence_Count(t, value);
    Py_DECREF(t);
    return n < 0 ? NULL : PyLong_FromSsize_t(n);
}

static PyObject *Record_index(RecordObject *self, PyObject *const *args, Py_ssize_t nargs) {
    PyObject *t = as_tuple(self);
    if (t == NULL) return NULL;
    PyObject *index = PyObject_GetAttrString(t, "index");
    Py_DECREF(t);
    if (index == NULL) return NULL;
    PyObject *result = PyObject_Vectorcall(index, args, nargs, NULL);
    Py_DECREF(index);
    return result;
}

static PyMethodDef Record_methods[] = {
    {"_asdict", (PyCFunction)Record_asdict, METH_NOARGS, "The fields as a dict, by name."},
    {"_replace", (PyCFunction)(void (*)(void))Record_replace, METH_VARARGS | METH_KEYWORDS,
     "A new Record with the given fields replaced."},
    {"_make", (PyCFunction)Record_make, METH_O | METH_CLASS, "A Record from an iterable of its 8 fields."},
    {"__getnewargs__", (PyCFunction)Record_getnewargs, METH_NOARGS, NULL},
    {"__reduce__", (PyCFunction)Record_reduce, METH_NOARGS, NULL},
    {"count", (PyCFunction)Record_count, METH_O, "How many fields equal the value."},
    {"index", (PyCFunction)(void (*)(void))Record_index, METH_FASTCALL, "Position of the first field equal to the value."},
    {NULL}};

static PyGetSetDef Record_getset[] = {
    {"topic", (getter)get_field, NULL, NULL, (void *)(intptr_t)F_TOPIC},
    {"partition", (getter)get_field, NULL, NULL, (void *)(intptr_t)F_PARTITION},
    {"offset", (getter)get_field, NULL, NULL, (void *)(intptr_t)F_OFFSET},
    {"key", (getter)get_field, NULL, NULL, (void *)(intptr_t)F_KEY},
    {"timestamp_ms", (getter)get_field, NULL, "None when the broker gave no timestamp.",
     (void *)(intptr_t)F_TIMESTAMP_MS},
    {"timestamp_type", (getter)get_field, NULL, NULL, (void *)(intptr_t)F_TIMESTAMP_TYPE},
    {"headers", (getter)get_field, NULL, "(name, value) pairs.", (void *)(intptr_t)F_HEADERS},
    {"topic_partition", (getter)get_topic_partition, NULL, "TopicPartition(topic, partition).", NULL},
    {NULL}};

/* The value is the field a consume loop reads for every record: a slot, which the interpreter reads
   without a call (a specialized attribute load), where the other fields go through a getter. */
static PyMemberDef Record_members[] = {
    {"value", T_OBJECT_EX, offsetof(RecordObject, value), READONLY, NULL},
    {NULL}};

static PySequenceMethods Record_as_sequence = {
    .sq_length = Record_length,
    .sq_item = (ssizeargfunc)Record_item,
    .sq_contains = (objobjproc)Record_contains,
};

static PyMappingMethods Record_as_mapping = {
    .mp_length = Record_length,
    .mp_subscript = (binaryfunc)Record_subscript,
};

static PyNumberMethods Record_as_number = {
    .nb_add = Record_add,
    .nb_multiply = Record_multiply,
};

PyDoc_STRVAR(Record_doc,
             "Record(topic, partition, offset, key, value, timestamp_ms, timestamp_type, headers=())\n--\n\n"
             "One consumed message. ``timestamp_ms`` is None when the broker gave no timestamp.");

static PyTypeObject RecordType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "static_consumer.Record",
    .tp_basicsize = sizeof(RecordObject),
    .tp_dealloc = (destructor)Record_dealloc,
    .tp_repr = (reprfunc)Record_repr,
    .tp_as_number = &Record_as_number,
    .tp_as_sequence = &Record_as_sequence,
    .tp_as_mapping = &Record_as_mapping,
    .tp_hash = (hashfunc)Record_hash,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_SEQUENCE,
    .tp_doc = Record_doc,
    .tp_richcompare = Record_richcompare,
    .tp_iter = (getiterfunc)Record_iter,
    .tp_methods = Record_methods,
    .tp_members = Record_members,
    .tp_getset = Record_getset,
    .tp_new = Record_new,
};

/* Same name: a Record built with fields that could refer back to it; users see a Record. */
static PyTypeObject TrackedRecordType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "static_consumer.Record",
    .tp_basicsize = sizeof(RecordObject),
    .tp_dealloc = (destructor)Tracked_dealloc,
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC | Py_TPFLAGS_SEQUENCE,
    .tp_traverse = (traverseproc)Tracked_traverse,
    .tp_clear = (inquiry)Tracked_clear,
    .tp_base = &RecordType,
    .tp_alloc = PyType_GenericAlloc,
    .tp_free = PyObject_GC_Del,
};

/* -- module functions ------------------------------------------------------------------------------- */

/* The last message of one (topic, partition) in a batch. */
typedef struct {
    PyObject *topic; /* strong */
    long partition;
    Py_ssize_t last;
} Position;

PyDoc_STRVAR(wrap_doc,
             "wrap(msgs, topic, /)\n--\n\n"
             "Replace the client's messages in the list ``msgs`` by message-backed Records, in place, and "
             "return the highest offset per (topic, partition). ``topic``: the one topic every message is "
             "of, if known (saves a topic() call per message). When a message has an error (its error() "
             "is not None), return None and leave the list as it is.");

static PyObject *wrap(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_CheckExact(args[0]) || !(args[1] == Py_None || PyUnicode_Check(args[1]))) {
        PyErr_SetString(PyExc_TypeError, "wrap(msgs: list, topic: str | None)");
        return NULL;
    }
    PyObject *msgs = args[0], *topic = args[1], *result = NULL;
    Py_ssize_t n = PyList_GET_SIZE(msgs), used = 0, room = 8, cached = -1;
    if (n > 0) learn_type(Py_TYPE(PyList_GET_ITEM(msgs, 0)));
    int failed = 0; /* an error event among the messages: the list is left untouched */
    Position *seen = PyMem_Malloc(room * sizeof(Position));
    if (seen == NULL) return PyErr_NoMemory();
    /* One pass: error events, and the last message of each partition (they come in offset order). */
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *msg = PyList_GET_ITEM(msgs, i);
        PyObject *err = call(msg, M_ERROR);
        if (err == NULL) goto done;
        Py_DECREF(err);
        if (err != Py_None) {
            failed = 1;
            goto done;
        }
        PyObject *p = call(msg, M_PARTITION);
        if (p == NULL) goto done;
        long partition = PyLong_AsLong(p);
        Py_DECREF(p);
        if (partition == -1 && PyErr_Occurred()) goto done;
        PyObject *t = topic;
        if (t == Py_None) {
            t = call(msg, M_TOPIC);
            if (t == NULL) goto done;
        } else {
            Py_INCREF(t);
        }
        Py_ssize_t at = -1;
        /* Messages come in runs of one partition: try the one before first. */
        if (cached >= 0 && seen[cached].partition == partition) {
            int same = seen[cached].topic == t ? 1 : PyObject_RichCompareBool(seen[cached].topic, t, Py_EQ);
            if (same < 0) goto fail_topic;
            if (same) at = cached;
        }
        for (Py_ssize_t j = 0; at < 0 && j < used; j++) {
            if (seen[j].partition != partition) continue;
            int same = seen[j].topic == t ? 1 : PyObject_RichCompareBool(seen[j].topic, t, Py_EQ);
            if (same < 0) goto fail_topic;
            if (same) at = j;
        }
        if (at < 0) {
            if (used == room) {
                Position *more = PyMem_Realloc(seen, 2 * room * sizeof(Position));
                if (more == NULL) {
                    PyErr_NoMemory();
                    goto fail_topic;
                }
                seen = more;
                room *= 2;
            }
            at = used++;
            seen[at].topic = t;
            seen[at].partition = partition;
            t = NULL; /* now owned by seen[at] */
        }
        Py_XDECREF(t);
        seen[at].last = i;
        cached = at;
        continue;
    fail_topic:
        Py_DECREF(t);
        goto done;
    }
    result = PyDict_New();
    if (result == NULL) goto done;
    for (Py_ssize_t j = 0; j < used; j++) {
        PyObject *offset = call(PyList_GET_ITEM(msgs, seen[j].last), M_OFFSET);
        PyObject *key = offset == NULL ? NULL : Py_BuildValue("(Ol)", seen[j].topic, seen[j].partition);
        if (key == NULL || PyDict_SetItem(result, key, offset) < 0) {
            Py_XDECREF(offset);
            Py_XDECREF(key);
            Py_CLEAR(result);
            goto done;
        }
        Py_DECREF(offset);
        Py_DECREF(key);
    }
    for (Py_ssize_t i = 0; i < n; i++) { /* the records take over the list's references to the messages */
        RecordObject *record = new_record(PyList_GET_ITEM(msgs, i));
        if (record == NULL) { /* out of memory, or a text value that is no UTF-8: the messages back */
            for (Py_ssize_t j = 0; j < i; j++) {
                RecordObject *made = (RecordObject *)PyList_GET_ITEM(msgs, j);
                Py_INCREF(made->msg);
                PyList_SET_ITEM(msgs, j, made->msg);
                Py_DECREF(made);
            }
            Py_CLEAR(result);
            goto done;
        }
        PyList_SET_ITEM(msgs, i, (PyObject *)record);
    }
done:
    for (Py_ssize_t j = 0; j < used; j++) Py_DECREF(seen[j].topic);
    PyMem_Free(seen);
    if (failed) Py_RETURN_NONE;
    return result;
}

PyDoc_STRVAR(wrap_one_doc, "wrap_one(msg, /)\n--\n\nA message-backed Record of one message (that has no error).");

static PyObject *wrap_one(PyObject *module, PyObject *msg) {
    learn_type(Py_TYPE(msg));
    Py_INCREF(msg);
    RecordObject *record = new_record(msg);
    if (record == NULL) Py_DECREF(msg);
    return (PyObject *)record;
}

PyDoc_STRVAR(column_doc, "column(records, index, /)\n--\n\nField ``index`` of every Record of the list.");

static PyObject *column(PyObject *module, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 2 || !PyList_Check(args[0])) {
        PyErr_SetString(PyExc_TypeError, "column(records: list, index: int)");
        return NULL;
    }
    long index = PyLong_AsLong(args[1]);
    if (index == -1 && PyErr_Occurred()) return NULL;
    if (index < 0 || index >= NFIELDS) {
        PyErr_SetString(PyExc_IndexError, "no such field");
        return NULL;
    }
    PyObject *records = args[0];
    Py_ssize_t n = PyList_GET_SIZE(records);
    PyObject *out = PyList_New(n);
    if (out == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n && i < PyList_GET_SIZE(records); i++) {
        PyObject *r = PyList_GET_ITEM(records, i), *v;
        if (Record_Check(r)) {
            v = field((RecordObject *)r, (int)index);
        } else {
            v = PyObject_GetAttr(r, PyTuple_GET_ITEM(field_names, index));
        }
        if (v == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, i, v);
    }
    return out;
}

static PyMethodDef module_methods[] = {
    {"wrap", (PyCFunction)(void (*)(void))wrap, METH_FASTCALL, wrap_doc},
    {"wrap_one", (PyCFunction)wrap_one, METH_O, wrap_one_doc},
    {"column", (PyCFunction)(void (*)(void))column, METH_FASTCALL, column_doc},
    {NULL}};

static struct PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT, "static_consumer._base.records.native",
    "The native Record: message-backed records made in place of the client's messages.", -1, module_methods};

PyMODINIT_FUNC PyInit_native(void) {
    for (int i = 0; i < NMETHODS; i++) {
        method_names[i] = PyUnicode_InternFromString(METHOD_NAMES[i]);
        if (method_names[i] == NULL) return NULL;
    }
    field_names = PyTuple_New(NFIELDS);
    if (field_names == NULL) return NULL;
    for (int i = 0; i < NFIELDS; i++) {
        PyObject *name = PyUnicode_InternFromString(FIELD_NAMES[i]);
        if (name == NULL) return NULL;
        PyTuple_SET_ITEM(field_names, i, name);
    }
    empty_tuple = PyTuple_New(0);
    if (empty_tuple == NULL || PyType_Ready(&RecordType) < 0 || PyType_Ready(&TrackedRecordType) < 0)
        return NULL;
    PyObject *defaults = Py_BuildValue("{sO}", "headers", empty_tuple);
    if (defaults == NULL || PyDict_SetItemString(RecordType.tp_dict, "_fields", field_names) < 0 ||
        PyDict_SetItemString(RecordType.tp_dict, "__match_args__", field_names) < 0 ||
        PyDict_SetItemString(RecordType.tp_dict, "_field_defaults", defaults) < 0)
        return NULL;
    Py_DECREF(defaults);
    PyType_Modified(&RecordType);
    /* isinstance(record, collections.abc.Sequence), as for a named tuple */
    PyObject *abc = PyImport_ImportModule("collections.abc");
    if (abc == NULL) return NULL;
    PyObject *sequence = PyObject_GetAttrString(abc, "Sequence");
    Py_DECREF(abc);
    if (sequence == NULL) return NULL;
    PyObject *registered = PyObject_CallMethod(sequence, "register", "O", (PyObject *)&RecordType);
    Py_DECREF(sequence);
    if (registered == NULL) return NULL;
    Py_DECREF(registered);
    PyObject *m = PyModule_Create(&module_def);
    if (m == NULL) return NULL;
    Py_INCREF(&RecordType);
    if (PyModule_AddObject(m, "Record", (PyObject *)&RecordType) < 0) {
        Py_DECREF(&RecordType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
