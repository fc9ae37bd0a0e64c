#pragma once
// Which process this is among the processes of one SPMD program. Single-process builds answer
// for one process; the distributed layer (MPI) replaces the answers once initialised.
#include <vector>

#include "spmd/device.h"

namespace spmd::runtime {

int this_process();
int process_total();
int first_global_device_id();  // global id of this process's local device 0
std::vector<Device> global_devices();
// Local device count of every process (one entry when single-process).
std::vector<int> process_device_counts();

// How many processes of the program run on this host (they share its cores); 1 when alone.
int processes_on_host();

// Set by the distributed layer after it has exchanged every process's local device count.
void set_process_layout(int index, std::vector<int> local_counts, int on_host = 1);

}  // namespace spmd::runtime
