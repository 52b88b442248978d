#!/usr/bin/env bash
# gpu_slug_test.sh: scripts/gpu_slug.sh keeps the words that tell GPUs apart, so that no GPU writes
# into another's results/ folder; the H100 SXM boards keep "h100", the folder the committed results
# are in. Also: a name with no word at all is refused (exit 2).
set -uo pipefail
cd "$(dirname "$0")/.."
bad=0
while IFS='|' read -r name want; do
  got=$(bash scripts/gpu_slug.sh "$name")
  if [ "$got" = "$want" ]; then echo "ok    $name -> $got"; else echo "FAIL  $name -> $got (expected $want)"; bad=1; fi
done <<'TABLE'
NVIDIA H100 80GB HBM3|h100
NVIDIA H100 SXM|h100
NVIDIA H100 SXM5 80GB|h100
NVIDIA H100 PCIe|h100_pcie
NVIDIA H100 NVL|h100_nvl
NVIDIA H200|h200
NVIDIA GH200 480GB|gh200
NVIDIA A100-SXM4-80GB|a100
NVIDIA A100 80GB PCIe|a100_pcie
NVIDIA RTX 6000 Ada Generation|rtx_6000_ada
Quadro RTX 8000|quadro_rtx_8000
NVIDIA RTX PRO 6000 Blackwell Workstation Edition|rtx_pro_6000_blackwell
NVIDIA RTX PRO 6000 Blackwell Server Edition|rtx_pro_6000_blackwell_server
NVIDIA RTX PRO 6000 Blackwell Max-Q Workstation Edition|rtx_pro_6000_blackwell_max_q
NVIDIA GeForce RTX 4090|rtx_4090
NVIDIA GeForce RTX 4090 Laptop GPU|rtx_4090_laptop_gpu
Tesla T4|t4
NVIDIA L4|l4
TABLE
bash scripts/gpu_slug.sh '!!!' >/dev/null 2>&1
[ $? = 2 ] || { echo "FAIL  a name without a word is not refused with exit 2"; bad=1; }
exit $bad
