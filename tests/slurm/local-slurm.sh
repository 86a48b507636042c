# local-slurm.sh - a real single-node Slurm for tests, under one temporary
# directory and on loopback only. Sourced; defines:
#   al_slurm_up DIR     start munged and slurmctld/slurmd with everything in DIR;
#                       exports SLURM_CONF; returns 0 when the node is idle
#   al_slurm_down DIR   stop them (scontrol shutdown, then the pids) and
#                       remove DIR; safe to call twice and after a failed up
# Needs Debian's slurm-wlm and munge. What made it work: a private munge
# socket and key (AuthInfo=socket=...), SlurmctldHost=localhost(127.0.0.1)
# (its address given: a chroot or container may resolve no names),
# NodeAddr=127.0.0.1, CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
# (every daemon binds 127.0.0.1 only), proctrack/linuxproc and task/none (no
# cgroups), no accounting database, MailProg=/bin/true, CPUs = nproc,
# RealMemory below the machine's.

al_slurm_free_port() {
    /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

al_slurm_conf() {
    local dir=$1 user mem ctld_port slurmd_port
    user=$(id -un)
    mem=$(awk '/MemTotal/ {print int($2 / 1024 / 2)}' /proc/meminfo)
    ctld_port=$(al_slurm_free_port)
    slurmd_port=$(al_slurm_free_port)
    while [ "$slurmd_port" = "$ctld_port" ]; do slurmd_port=$(al_slurm_free_port); done
    cat > "$dir/slurm.conf" <<CONF
ClusterName=attnlabtest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$dir/munge.sock
CommunicationParameters=NoInAddrAny,NoCtldInAddrAny
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MailProg=/bin/true
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MinJobAge=300
SlurmdTimeout=30
NodeName=localhost NodeHostname=localhost NodeAddr=127.0.0.1 CPUs=$(nproc) RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
CONF
}

al_slurm_up() {
    local dir=$1
    mkdir -p "$dir/state" "$dir/spool" || return 1
    chmod 700 "$dir"
    dd if=/dev/urandom of="$dir/munge.key" bs=1024 count=1 status=none && chmod 600 "$dir/munge.key"
    munged --force --socket="$dir/munge.sock" --key-file="$dir/munge.key" \
        --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" \
        --seed-file="$dir/munged.seed" || return 1
    al_slurm_conf "$dir"
    export SLURM_CONF=$dir/slurm.conf
    slurmctld -f "$SLURM_CONF" || return 1
    slurmd -f "$SLURM_CONF" -N localhost || return 1
    local i
    for i in $(seq 1 200); do
        if sinfo -h -n localhost -o %t 2>/dev/null | grep -qx idle; then return 0; fi
        sleep 0.1
    done
    echo "local slurm: the node did not become idle in 20 s" >&2
    return 1
}

al_slurm_down() {
    local dir=$1 f pid
    [ -d "$dir" ] || return 0
    [ -f "$dir/slurm.conf" ] && SLURM_CONF=$dir/slurm.conf scontrol shutdown >/dev/null 2>&1
    for f in slurmd slurmctld munged; do
        pid=$(cat "$dir/$f.pid" 2>/dev/null) || continue
        kill "$pid" 2>/dev/null
    done
    for f in slurmd slurmctld munged; do
        pid=$(cat "$dir/$f.pid" 2>/dev/null) || continue
        for _ in $(seq 1 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$pid" 2>/dev/null
    done
    rm -rf "$dir"
}
