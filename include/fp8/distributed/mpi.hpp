// MPI for data-parallel FP8 (host buffers): the amax reducer (one MPI call with max over all of a
// step's amaxes) and the FP8 weight all-gather, with errors as fp8::error naming the call and the rank.
// Needs <mpi.h>; the core headers do not include this file. See docs/distributed.md.
#pragma once

#include "mpi_all_gather.hpp"
#include "mpi_amax_reducer.hpp"
#include "mpi_communicator.hpp"
#include "shard_layout.hpp"
