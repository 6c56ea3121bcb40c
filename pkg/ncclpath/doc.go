// Package ncclpath reproduces the path computation NCCL runs on each server
// before it searches rings and trees (ncclTopoComputePaths, the trim, and the
// second ncclTopoComputePaths): for every GPU and NIC the best path to every
// other GPU and NIC, its type (LOC, NVL, NVB, C2C, PIX, PXB, P2C, PXN, PHB,
// SYS, NET), its bottleneck bandwidth in GB/s as NCCL counts it and its hop
// count, plus the P2P and GPUDirect RDMA verdicts, the PXN rewrites and the
// NIC each GPU uses per channel.
//
// A server is a System: built-in templates (Template, TemplateForGPU), NCCL's
// topology XML (ParseXML, for what NCCL_TOPO_DUMP_FILE wrote on a real
// machine), or built with the Add methods. Compute turns it into a Result,
// which offers an nvidia-smi topo -m style Matrix, a flat JSON Report and the
// stream's paths record (StreamPaths). Compute depends only on the System and
// the Options, so a cluster of identical servers needs one Compute.
//
// # What follows NCCL
//
//   - Link bandwidths: PCIe lanes × rate / 80, NVLinks × per-link bandwidth
//     of the GPU's SM version, NIC ports speed/8000, C2C bw × count / 1000,
//     inter-socket links from the first CPU's vendor and model, LocBW for a
//     NIC on a CPU and Broadcom peer links. NVLinks to NVSwitch chips fold
//     into one NVSwitch node. Links are ordered as NCCL orders them (by
//     bandwidth, the PCIe up-link last), which decides between equal paths.
//   - A level-synchronous BFS from every CPU, GPU, NIC port and the NVSwitch;
//     a path's bandwidth is the minimum over its links, measured in the
//     direction leaving the destination, as NCCL's BFS grows from there.
//     GPUs relay only NVLink traffic to another GPU, one GPU at most (NVB,
//     unless Options.NVBDisable). The type is the worst of the hops: PCIe
//     switch to switch is PXB, PCIe into a CPU is PHB, the inter-socket link
//     SYS, NVLink through a GPU NVB.
//   - The P2P check with NCCL's default level for the CPU (or NCCL_P2P_LEVEL /
//     NCCL_P2P_DISABLE); refused pairs go through the CPU nearest the
//     receiving GPU. GPUs in different containers (GPUInfo.Container) get
//     NET and are trimmed away unless they share the domain of Options.Rank.
//   - P2C for Grace (a GPU reaching its CPU by C2C and a NIC behind it).
//   - PXN: a GPU sends through the GPU NCCL considers local to a NIC when that
//     GPU is one NVLink hop away, at most PXB from the NIC, and either faster
//     to it or the sender's own path crosses a CPU.
//   - The GDR check (NCCL_NET_GDR_LEVEL, default PXB; the read rule for sends;
//     a PXN send uses the proxy's distance); refused pairs go through the
//     CPU nearest the GPU, both ways.
//   - The NIC per GPU and channel (ncclTopoGetLocalNet, with the mirrored GPU
//     index when the NIC count is a power of two).
//
// # NCCL versions
//
// Options.Version selects the rules of an NCCL release; the default is 2.27.
//
//	≤2.7        BFS keeps the largest bottleneck (the rule of the seed study);
//	            no GPU relaying; PXB = a PCIe hop on a path over 3 hops;
//	            P2P default SYS, PXB on ARM and Intel Broadwell, PHB on
//	            later Intel; GDR reads need an NVLink peer on every SM
//	2.8–2.29    BFS: fewest hops first, then bandwidth; NVB relaying
//	2.8–2.22    P2P default SYS, PXB on ARM, Intel and Zhaoxin
//	2.12+       PXN
//	2.20+       Hopper NVLink 20.6 GB/s (20.0 before)
//	2.21+       GDR detours only for paths better than PHB
//	2.23+       P2P default PXB, SYS on AMD with at most 2 GPUs
//	2.25+       64 channels (32 before)
//	2.26+       C2C links; Sapphire/Emerald Rapids inter-socket 22/40 GB/s
//	2.27+       P2C; PXN replaces paths worse than PXN (worse than PXB
//	            before); Blackwell NVLink 40.1 GB/s (40.0 before);
//	            NCCL_NET_GDR_C2C on
//	2.28+       NCCL_PXN_C2C on
//	2.30        BFS: best type, then bandwidth, then fewest hops; GDR level
//	            P2C; the PXN relay must have GDR; P2C only for local NICs
//
// The boundaries at 2.8 (end of the seed's rules, start of NVB) and of the
// pre-Ampere-only GDR read rule are inferred from the sources' history, not
// documented by NVIDIA; versions between documented ones take the nearest
// older rule.
//
// # Not modelled
//
// NVML's P2P sanity checks (there is no NVML), Broadcom switch flattening
// (give the flattened tree), virtual NIC fusion (NCCL_NET_MERGE_LEVEL; only
// the ports of one adapter are merged), multi-node NVLink (one host per
// System), 2.30's DEV nodes for GPU partitions (GPUs relay as in 2.2x), the
// ≤2.7 special case for NVLink paths through POWER CPUs, and the Intel P2P
// overhead, which NCCL applies during the ring/tree search, not here.
package ncclpath
