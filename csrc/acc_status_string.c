/* acc_status_string.c -- text of each status code. */
#include "accspmm.h"

const char *acc_status_string(int status) {
    switch (status) {
    case ACC_SUCCESS:
        return "success";
    case ACC_ERR_INVALID_ARGUMENT:
        return "invalid argument (null pointer, negative size or bad option)";
    case ACC_ERR_ROW_OFFSETS:
        return "invalid row offsets (must start at 0, never decrease and end at nnz)";
    case ACC_ERR_COLUMN_INDEX:
        return "column index out of range [0, k)";
    case ACC_ERR_PERMUTATION:
        return "not a permutation of the rows";
    case ACC_ERR_NOT_CANONICAL:
        return "CSR rows must be sorted without duplicates";
    case ACC_ERR_TOO_LARGE:
        return "size exceeds the limits of the format or kernel";
    case ACC_ERR_OUT_OF_MEMORY:
        return "out of host memory";
    case ACC_ERR_NO_DEVICE:
        return "no CUDA device available";
    case ACC_ERR_DEVICE_MEMORY:
        return "out of GPU memory";
    case ACC_ERR_CUDA:
        return "CUDA runtime error";
    case ACC_ERR_CUSPARSE_LOAD:
        return "cuSPARSE library could not be loaded";
    case ACC_ERR_CUSPARSE:
        return "cuSPARSE call failed";
    case ACC_ERR_UNSUPPORTED:
        return "not supported by this build";
    default:
        return "unknown status";
    }
}
