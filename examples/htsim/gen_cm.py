#!/usr/bin/env python3
"""Write htsim connection matrices (.cm) of the shapes htsim's generators
write, for simccl-decompose --from-htsim:

  gen_cm.py permutation NODES SIZE SEED   every host to one other, start 0
  gen_cm.py incast NODES FANIN SIZE       FANIN hosts into host 0, start 0
  gen_cm.py alltoall-serial NODES SIZE    each host sends to the others in
                                          turn, each flow triggered by the
                                          previous one's send_done (oneshot)

The matrix goes to stdout. Python's standard library only.
"""
import random
import sys


def permutation(nodes, size, seed):
    rng = random.Random(seed)
    while True:
        dst = list(range(nodes))
        rng.shuffle(dst)
        if all(i != d for i, d in enumerate(dst)):
            break
    lines = [f"Nodes {nodes}", f"Connections {nodes}"]
    lines += [f"{i}->{d} id {i + 1} start 0 size {size}" for i, d in enumerate(dst)]
    return lines


def incast(nodes, fanin, size):
    lines = [f"Nodes {nodes}", f"Connections {fanin}"]
    lines += [f"{i}->0 id {i} start 0 size {size}" for i in range(1, fanin + 1)]
    return lines


def alltoall_serial(nodes, size):
    flows, triggers = [], []
    fid, trig = 0, 0
    for n in range(nodes):
        for step in range(nodes - 1):
            fid += 1
            dst = (n + step + 1) % nodes
            line = f"{n}->{dst} id {fid}"
            if step == 0:
                line += " start 0"
            else:
                line += f" trigger {trig}"
            line += f" size {size}"
            if step != nodes - 2:
                trig += 1
                line += f" send_done_trigger {trig}"
                triggers.append(f"trigger id {trig} oneshot")
            flows.append(line)
    return [f"Nodes {nodes}", f"Connections {len(flows)}", f"Triggers {len(triggers)}"] + flows + triggers


def main(argv):
    kind, args = argv[1], [int(a) for a in argv[2:]]
    gen = {"permutation": permutation, "incast": incast, "alltoall-serial": alltoall_serial}[kind]
    print("\n".join(gen(*args)))


if __name__ == "__main__":
    main(sys.argv)
