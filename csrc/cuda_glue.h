/*
 * cuda_glue.h -- shared by the files of the accspmm._cuda module (cuda_module.c, cuda_launcher.c).
 */
#ifndef ACC_CUDA_GLUE_H
#define ACC_CUDA_GLUE_H

#include "glue.h"

/* Raises for a CUDA-layer status (MemoryError, ValueError, NotImplementedError or RuntimeError),
 * with the layer's own last message (cuSPARSE's when `cusparse`); returns NULL. */
PyObject *acc_py_cuda_raise(int status, const char *context, int cusparse);

/* Adds the Launcher type and set_interop() to the module (cuda_launcher.c); -1 with an exception. */
int acc_launcher_add(PyObject *module);

/* Adds the GPU SpGEMM functions and constants (cuda_spgemm.c); -1 with an exception. */
int acc_spgemm_add(PyObject *module);

#endif
