#!/usr/bin/env bash
# A real Slurm cluster on this machine, for the tests and for trying the Slurm launcher:
# munge, MariaDB + slurmdbd (accounting, which sacct and so submitit need), slurmctld, and
# two slurmd daemons: node "$host" (this host) and node "$host-2" (a second slurmd on this
# same host, on its own port, so that multi-node jobs and srun steps across nodes run for
# real).  Partition "debug" (the default) holds "$host"; partition "multi" holds both.
#
#   bash scripts/slurm_cluster.sh          # install (Debian, root) and start; idempotent
#   bash scripts/slurm_cluster.sh stop     # stop the daemons
#
# State lives in /var/lib/bench-slurm; the daemons run as root (a test cluster, not a
# production set-up).
set -euo pipefail
cd "$(dirname "$0")/.."

state=/var/lib/bench-slurm
host=$(hostname -s)

stop() {
  for daemon in slurmd slurmctld slurmdbd; do pkill -x "$daemon" 2>/dev/null || true; done
  if [ -f "$state/mariadb.pid" ]; then kill "$(cat "$state/mariadb.pid")" 2>/dev/null || true; fi
  pkill -x munged 2>/dev/null || true
  for _ in $(seq 40); do
    local left=""
    for daemon in slurmd slurmctld slurmdbd mariadbd munged; do
      pgrep -x "$daemon" >/dev/null && left=1
    done
    [ -n "$left" ] || return 0
    sleep 0.25
  done
}

if [ "${1:-start}" = stop ]; then stop; exit 0; fi

source scripts/system_deps.sh --functions-only
apt_install slurm-wlm slurmdbd munge mariadb-server mariadb-client

mkdir -p "$state"/{ctld,slurmd,log,mysql} /etc/slurm /run/mysqld /run/munge /var/log/munge /var/lib/munge
cpus=$(nproc)
mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 - 1024 ))

# --- munge: the authentication every Slurm daemon and client uses
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown -R munge:munge /etc/munge /run/munge /var/log/munge /var/lib/munge
chmod 0700 /etc/munge && chmod 0400 /etc/munge/munge.key
if ! pgrep -x munged >/dev/null; then
  runuser -u munge -- /usr/sbin/munged --force
fi

# --- MariaDB for slurmdbd
if ! mysqladmin --socket="/run/mysqld/mysqld.sock" ping >/dev/null 2>&1; then
  if [ ! -d "$state/mysql/mysql" ]; then
    mariadb-install-db --user=root --datadir="$state/mysql" --auth-root-authentication-method=socket \
      >"$state/log/mariadb-install.log" 2>&1
  fi
  (mariadbd --user=root --datadir="$state/mysql" --socket="/run/mysqld/mysqld.sock" \
     --pid-file="$state/mariadb.pid" --skip-networking=0 --bind-address=127.0.0.1 --port=3306 \
     >"$state/log/mariadb.log" 2>&1 &)
  for _ in $(seq 60); do
    mysqladmin --socket="/run/mysqld/mysqld.sock" ping >/dev/null 2>&1 && break
    sleep 0.5
  done
fi
mysql --socket="/run/mysqld/mysqld.sock" -u root <<'SQL'
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'bench-slurm';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
FLUSH PRIVILEGES;
SQL

# --- configuration
cat >/etc/slurm/slurmdbd.conf <<EOF
AuthType=auth/munge
DbdHost=localhost
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageLoc=slurm_acct_db
StorageUser=slurm
StoragePass=bench-slurm
StoragePort=3306
LogFile=$state/log/slurmdbd.log
PidFile=$state/slurmdbd.pid
EOF
chmod 600 /etc/slurm/slurmdbd.conf

cat >/etc/slurm/slurm.conf <<EOF
ClusterName=bench
SlurmctldHost=$host
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/slurmd/%n
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd-%n.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd-%n.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/none
ReturnToService=2
KillWait=10
MinJobAge=300
InactiveLimit=0
NodeName=$host CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
NodeName=$host-2 NodeHostname=$host Port=6828 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
PartitionName=multi Nodes=$host,$host-2 MaxTime=INFINITE State=UP
EOF
echo "CgroupAutomount=no" >/etc/slurm/cgroup.conf

if ! pgrep -x slurmdbd >/dev/null; then slurmdbd; fi
for _ in $(seq 60); do sacctmgr -n list cluster >/dev/null 2>&1 && break; sleep 0.5; done
if ! sacctmgr -n -P list cluster format=cluster | grep -qx bench; then
  sacctmgr -i add cluster bench >/dev/null
fi
# A cluster started by an older version of this script (one slurmd, no -N) is restarted.
if pgrep -x slurmd >/dev/null && ! pgrep -f "slurmd -N $host-2" >/dev/null; then
  pkill -x slurmd || true; pkill -x slurmctld || true; sleep 1
fi
mkdir -p "$state/slurmd/$host" "$state/slurmd/$host-2"
if ! pgrep -x slurmctld >/dev/null; then slurmctld; fi
for node in "$host" "$host-2"; do
  pgrep -f "slurmd -N $node\$" >/dev/null || slurmd -N "$node"
done
for node in "$host" "$host-2"; do
  for _ in $(seq 60); do
    state_now=$(sinfo -h -n "$node" -o %T 2>/dev/null | head -1 || true)
    case "$state_now" in idle*|mixed*|allocated*) break ;; esac
    sleep 0.5
  done
  scontrol update NodeName="$node" State=RESUME >/dev/null 2>&1 || true
done
sinfo -h -o "slurm: partition %P, %D node(s) %N, state %T"
