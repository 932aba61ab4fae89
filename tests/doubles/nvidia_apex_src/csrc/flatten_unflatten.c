/* STAND-IN apex extension apex_C (test double): reports the compiler that built it. */
#include <Python.h>

static PyObject *compiler(PyObject *self, PyObject *args) {
    return PyUnicode_FromString(__VERSION__);
}

static PyMethodDef methods[] = {
    {"compiler", compiler, METH_NOARGS, "The __VERSION__ of the compiler that built this module."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "apex_C", NULL, -1, methods};

PyMODINIT_FUNC PyInit_apex_C(void) { return PyModule_Create(&module); }
