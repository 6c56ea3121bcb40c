#!/usr/bin/env bash
# Sets up a real single-node Slurm on this machine for the sweeps' SLURM=1
# path: Debian's slurmctld, slurmd and munge, started without systemd, one
# partition "local" holding this host with all its CPUs. Needs root (apt
# and daemons); run it once, then `make -C pipelines/chunk-sweep SLURM=1`.
# Idempotent: daemons already answering are left alone. Exits 2 when not
# root and 3 when the packages cannot be installed (callers skip then).
#
# `slurm-setup.sh stop` stops the daemons an earlier run started (listed in
# $state), and only those: a Slurm that was running before is left alone.
set -euo pipefail
state=${FABRICSIM_SLURM_STATE:-/run/fabricsim-slurm.started}
if [ "${1:-}" = stop ]; then
	[ -f "$state" ] || exit 0
	# slurmd before slurmctld, munge last: each stops while what it talks to still answers.
	for d in slurmd slurmctld munged; do
		if grep -qx "$d" "$state" && pkill -x "$d"; then
			for _ in $(seq 1 50); do pgrep -x "$d" >/dev/null || break; sleep 0.1; done
			echo "slurm-setup: stopped $d"
		fi
	done
	rm -f "$state"
	exit 0
fi
if [ "$(id -u)" != 0 ]; then
	echo "slurm-setup: needs root (installs Debian's slurm-wlm and munge, starts their daemons)" >&2
	exit 2
fi
if ! command -v slurmctld >/dev/null || ! command -v munged >/dev/null || ! command -v sbatch >/dev/null; then
	echo "slurm-setup: installing slurmctld, slurmd, slurm-client and munge (apt)"
	pkgs="slurmctld slurmd slurm-client munge"
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y -qq --no-install-recommends $pkgs >/dev/null 2>&1 &&
		! { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq --no-install-recommends $pkgs >/dev/null 2>&1; }; then
		echo "slurm-setup: apt-get install $pkgs failed (is the Debian archive reachable?)" >&2
		exit 3
	fi
fi
host=$(hostname -s)
cpus=$(nproc)
mem=$(awk '/MemTotal/ { print int($2 / 1024) - 512 }' /proc/meminfo)
mkdir -p /etc/slurm /var/spool/slurmctld /var/spool/slurmd /var/log/slurm /run/munge /var/lib/munge /var/log/munge
if [ ! -s /etc/munge/munge.key ]; then
	dd if=/dev/urandom of=/etc/munge/munge.key bs=1 count=1024 status=none
fi
chown -R munge:munge /etc/munge /run/munge /var/lib/munge /var/log/munge 2>/dev/null || true
chmod 0400 /etc/munge/munge.key
chmod 0755 /run/munge
cat >/etc/slurm/slurm.conf <<CONF
# Written by fabricsim's pipelines/slurm-setup.sh: one node, one partition.
ClusterName=fabricsim
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd.pid
SlurmctldLogFile=/var/log/slurm/slurmctld.log
SlurmdLogFile=/var/log/slurm/slurmd.log
MpiDefault=none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
NodeName=$host CPUs=$cpus RealMemory=$mem State=UNKNOWN
PartitionName=local Nodes=$host Default=YES MaxTime=INFINITE State=UP
CONF
if ! pgrep -x munged >/dev/null; then
	runuser -u munge -- /usr/sbin/munged --force && echo munged >>"$state"
fi
if ! pgrep -x slurmctld >/dev/null; then
	/usr/sbin/slurmctld && echo slurmctld >>"$state"
fi
if ! pgrep -x slurmd >/dev/null; then
	/usr/sbin/slurmd && echo slurmd >>"$state"
fi
for _ in $(seq 1 30); do
	if sinfo -h -o '%T' 2>/dev/null | grep -qE '^(idle|mixed|allocated)'; then
		echo "slurm-setup: partition local on $host, $cpus CPUs: $(sinfo -h -o '%P %T %C')"
		exit 0
	fi
	scontrol update nodename="$host" state=resume >/dev/null 2>&1 || true
	sleep 1
done
echo "slurm-setup: the node did not come up; see /var/log/slurm/slurmctld.log and slurmd.log" >&2
exit 1
