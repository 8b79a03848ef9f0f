# Sourced by the bench scripts: what a results header records about the
# machine (the CPU model and its flags, from lscpu, else /proc/cpuinfo, else
# macOS's sysctl; x86 "flags" or aarch64 "Features"), and its load.
# The macOS branches have never run (no Mac here).

cpu_model() {
  { lscpu 2>/dev/null | sed -n 's/^Model name: *//p'
    grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2
    sysctl -n machdep.cpu.brand_string 2>/dev/null; } | head -1 | xargs
}

cpu_flags() {
  { lscpu 2>/dev/null | sed -n 's/^Flags: *//p'
    grep -m1 -E '^(flags|Features)' /proc/cpuinfo 2>/dev/null | cut -d: -f2
    sysctl hw.optional 2>/dev/null | sed -n 's/^hw\.optional\.\([^:]*\): 1$/\1/p' | tr '\n' ' '; } \
    | head -1 | xargs
}

# "2 CPU cores (AMD EPYC)"
cpu_cores() {
  echo "$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc) CPU cores ($(cpu_model))"
}

# The 1-, 5- and 15-minute load averages, space-separated.
load_avg() {
  if [ -r /proc/loadavg ]; then
    cut -d' ' -f1-3 /proc/loadavg
  else
    sysctl -n vm.loadavg 2>/dev/null | tr -d '{}' | xargs
  fi
}

# One header line of its own: the flags decide which kernels run.
cpu_flags_line() {
  echo "CPU flags (lscpu): $(cpu_flags)"
}
