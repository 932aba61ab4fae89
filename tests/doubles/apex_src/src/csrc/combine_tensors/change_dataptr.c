/* STAND-IN Ascend apex extension change_data_ptr (test double): reports the compiler that built it. */
#include <Python.h>

static PyObject *compiler(PyObject *self, PyObject *args) {
    return PyUnicode_FromString(__VERSION__);
}

static PyMethodDef methods[] = {
    {"compiler", compiler, METH_NOARGS, "The __VERSION__ of the compiler that built this module."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "change_data_ptr", NULL, -1, methods};

PyMODINIT_FUNC PyInit_change_data_ptr(void) { return PyModule_Create(&module); }
