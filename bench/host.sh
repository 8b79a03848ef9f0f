# Sourced by the bench scripts: what a results header records about the
# machine (the CPU model and its flags, from lscpu, else /proc/cpuinfo).

cpu_model() {
  { lscpu 2>/dev/null | sed -n 's/^Model name: *//p'; grep -m1 'model name' /proc/cpuinfo | cut -d: -f2; } \
    | head -1 | xargs
}

cpu_flags() {
  { lscpu 2>/dev/null | sed -n 's/^Flags: *//p'; grep -m1 '^flags' /proc/cpuinfo | cut -d: -f2; } \
    | head -1 | xargs
}

# "2 CPU cores (AMD EPYC)"
cpu_cores() {
  echo "$(nproc) CPU cores ($(cpu_model))"
}

# One header line of its own: the flags decide which kernels run.
cpu_flags_line() {
  echo "CPU flags (lscpu): $(cpu_flags)"
}
