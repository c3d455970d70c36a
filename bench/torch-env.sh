# Sourced by the bench scripts that run a PyTorch peer: sets torch_env, the environment
# the peer runs in (`env "${torch_env[@]}" /usr/bin/python3 ...`).
#
# The peer uses the OpenMP build of OpenBLAS, first on the library path whichever BLAS
# the alternatives system selects. OpenBLAS picks its kernels by the CPU's model number;
# a model newer than its table (Debian 12's 0.3.21 on some Xeons of these machines,
# model 207) falls back to its Prescott (SSE3) kernels, 4-5 times slower than its
# AVX-512 ones, which would make the peer one no careful user would accept. Then the
# core type is set by the instruction sets the CPU reports, as OPENBLAS_CORETYPE allows,
# and the scripts say so on stderr.
torch_env=(LD_LIBRARY_PATH=/usr/lib/x86_64-linux-gnu/openblas-openmp)
openblas_core=$(env "${torch_env[@]}" OPENBLAS_VERBOSE=2 OMP_NUM_THREADS=1 /usr/bin/python3 -c \
  'import torch; torch.mm(torch.ones(64, 64), torch.ones(64, 64))' 2>&1 | sed -n 's/^Core: //p' | head -n 1)
if [[ $openblas_core == Prescott ]]; then
  flags=$(grep -m 1 '^flags' /proc/cpuinfo)
  forced=""
  if [[ $flags == *" avx512f "* && $flags == *" avx512bw "* && $flags == *" avx512vl "* && $flags == *" avx512dq "* ]]; then
    forced=SkylakeX
  elif [[ $flags == *" avx2 "* && $flags == *" fma "* ]]; then
    forced=Haswell
  fi
  if [[ -n $forced ]]; then
    torch_env+=(OPENBLAS_CORETYPE=$forced)
    echo "bench: OpenBLAS does not know this CPU ($(grep -m 1 '^model name' /proc/cpuinfo | sed 's/.*: //'), model $(grep -m 1 '^model' /proc/cpuinfo | sed 's/.*: //')) and picked its Prescott kernels; the peer runs with OPENBLAS_CORETYPE=$forced (the instruction sets the CPU reports)" >&2
  fi
fi
