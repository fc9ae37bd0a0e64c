#pragma once
// spmd: composable function transformations (jit, vmap, grad, pmap) over n-dimensional arrays,
// and single-program multiple-data execution across devices. One header for everything.
#include "spmd/array.h"
#include "spmd/callback.h"
#include "spmd/control_flow.h"
#include "spmd/custom_derivatives.h"
#include "spmd/device.h"
#include "spmd/distributed.h"
#include "spmd/dtype.h"
#include "spmd/error.h"
#include "spmd/io.h"
#include "spmd/lax.h"
#include "spmd/nn.h"
#include "spmd/ops.h"
#include "spmd/program.h"
#include "spmd/random.h"
#include "spmd/transforms.h"
