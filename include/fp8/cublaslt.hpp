// The cuBLASLt FP8 GEMM wrapper (component fp8::cublaslt): problem description, up-front checks,
// typed errors, and the RAII handle with its workspace and algorithm cache. Host code, CUDA toolkit.
#pragma once

#include "cublaslt/error.hpp"
#include "cublaslt/handle.hpp"
#include "cublaslt/problem.hpp"
#include "cublaslt/validate.hpp"
