import { createHash } from 'node:crypto';

/** The simulated GPUs of one local instance. */
export interface SimulatedGpus {
  instanceId: string;
  name: string;
  count: number;
  vramGb: number | null;
}

const DRIVER_VERSION = '550.54.15';
/** Stands for the utilisation the machine's own file sets (see {@link UTILIZATION_FILE}); rendered as a call, not a constant. */
const UTILIZATION = '\u0000utilization';

/**
 * A file in the machine's home (relative to `$HOME`) holding the GPU utilisation, in percent,
 * every simulated GPU reports: `echo 87 > ~/.gpr-sim/utilization` from inside the machine makes
 * it look busy. Absent or unreadable: 0 % (an idle machine).
 */
export const UTILIZATION_FILE = '.gpr-sim/utilization';
const CUDA_VERSION = '12.4';
// Bus ids of a real 8-GPU HGX board, so multi-GPU listings look like the machines they imitate.
const BUS_IDS = ['18', '2A', '3A', '5D', '9A', 'AB', 'BA', 'DB'];

/** Board power limits by model, so the `Pwr:Usage/Cap` column is plausible. */
const POWER_CAPS: [RegExp, number][] = [
  [/H100.*PCIe/i, 350],
  [/H100|H200/i, 700],
  [/A100.*PCIe/i, 300],
  [/A100/i, 400],
  [/L40S|L40/i, 350],
  [/\bL4\b/i, 72],
  [/A6000/i, 300],
  [/4090/i, 450],
  [/3090/i, 350],
];

interface GpuFacts {
  index: number;
  uuid: string;
  busId: string;
  totalMiB: number | null;
  powerCap: number;
  powerDraw: number;
  fan: string;
  temp: number;
}

function facts(g: SimulatedGpus): GpuFacts[] {
  const powerCap = POWER_CAPS.find(([re]) => re.test(g.name))?.[1] ?? 300;
  // Drivers reserve a slice of VRAM; 0.9956 turns 80 GB into the 81559 MiB a real H100 reports.
  const totalMiB = g.vramGb === null ? null : Math.floor(g.vramGb * 1024 * 0.9956);
  const consumer = /GeForce|RTX/i.test(g.name);
  return Array.from({ length: g.count }, (_, index) => {
    const h = createHash('sha256').update(`${g.instanceId}:${index}`).digest('hex');
    const uuid = `GPU-${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
    const bus = BUS_IDS[index] ?? (0x100 + index).toString(16).toUpperCase().slice(-2);
    return {
      index,
      uuid,
      busId: `00000000:${bus}:00.0`,
      totalMiB,
      powerCap,
      powerDraw: Math.round(powerCap * 0.1),
      fan: consumer ? '30%' : 'N/A',
      temp: 27 + (index % 4),
    };
  });
}

const WIDTH = 89;
const row = (inner: string) => `|${inner.padEnd(WIDTH).slice(0, WIDTH)}|`;
const rule = (c: string) => `+${c.repeat(WIDTH)}+`;

function table(g: SimulatedGpus, gpus: GpuFacts[]): string {
  const cells = (a: string, b: string, c: string) => `|${a}|${b}|${c}|`;
  const name = g.name.length > 29 ? g.name.slice(0, 29) : g.name;
  const mem = (n: number | null) => (n === null ? 'N/A' : `${n}MiB`);
  const lines = [
    rule('-'),
    row(
      ` ${`NVIDIA-SMI ${DRIVER_VERSION}`.padEnd(34)}${`Driver Version: ${DRIVER_VERSION}`.padEnd(31)}CUDA Version: ${CUDA_VERSION}`,
    ),
    `|${'-'.repeat(41)}+${'-'.repeat(24)}+${'-'.repeat(22)}+`,
    cells(' GPU  Name                 Persistence-M ', ' Bus-Id          Disp.A ', ' Volatile Uncorr. ECC '),
    cells(' Fan  Temp   Perf          Pwr:Usage/Cap ', '           Memory-Usage ', ' GPU-Util  Compute M. '),
    cells(' '.repeat(41), ' '.repeat(24), '               MIG M. '),
    `|${'='.repeat(41)}+${'='.repeat(24)}+${'='.repeat(22)}|`,
  ];
  for (const f of gpus) {
    const power = `${f.powerDraw}W / ${String(f.powerCap).padStart(4)}W`;
    lines.push(
      cells(
        `${String(f.index).padStart(4)}  ${name}`.padEnd(37) + 'On  ',
        ` ${`${f.busId} Off`.padStart(22)} `,
        ` ${'0'.padStart(20)} `,
      ),
      cells(
        ` ${`${f.fan.padEnd(3)}   ${f.temp}C    P0`}${power.padStart(24)} `,
        ` ${`${mem(f.totalMiB === null ? null : 0)} / ${mem(f.totalMiB).padStart(8)}`.padStart(22)} `,
        ` ${'0%'.padStart(7)}${'Default'.padStart(13)} `,
      ),
      cells(' '.repeat(41), ' '.repeat(24), ` ${'Disabled'.padStart(20)} `),
      `+${'-'.repeat(41)}+${'-'.repeat(24)}+${'-'.repeat(22)}+`,
    );
  }
  lines.push(
    '',
    rule('-'),
    row(' Processes:'),
    row('  GPU   GI   CI        PID   Type   Process name                              GPU Memory'),
    row('        ID   ID                                                               Usage'),
    rule('=').replace(/^\+|\+$/g, '|'),
    row('  No running processes found'),
    rule('-'),
  );
  return lines.join('\n');
}

/** Fields `--query-gpu` understands: canonical name, aliases, unit, value per GPU. */
function queryFields(g: SimulatedGpus, f: GpuFacts): { names: string[]; unit: string; value: string }[] {
  const mib = (n: number | null) => (n === null ? '[N/A]' : String(n));
  return [
    { names: ['index'], unit: '', value: String(f.index) },
    { names: ['count'], unit: '', value: String(g.count) },
    { names: ['name', 'gpu_name'], unit: '', value: g.name },
    { names: ['uuid', 'gpu_uuid'], unit: '', value: f.uuid },
    { names: ['pci.bus_id', 'gpu_bus_id'], unit: '', value: f.busId },
    { names: ['driver_version'], unit: '', value: DRIVER_VERSION },
    { names: ['memory.total'], unit: 'MiB', value: mib(f.totalMiB) },
    { names: ['memory.used'], unit: 'MiB', value: mib(f.totalMiB === null ? null : 0) },
    { names: ['memory.free'], unit: 'MiB', value: mib(f.totalMiB) },
    { names: ['utilization.gpu'], unit: '%', value: UTILIZATION },
    { names: ['utilization.memory'], unit: '%', value: '0' },
    { names: ['temperature.gpu'], unit: '', value: String(f.temp) },
    { names: ['power.draw'], unit: 'W', value: `${f.powerDraw}.00` },
    { names: ['power.limit'], unit: 'W', value: `${f.powerCap}.00` },
    { names: ['persistence_mode'], unit: '', value: 'Enabled' },
  ];
}

const sq = (s: string) => (s === UTILIZATION ? '"$(utilization)"' : `'${s.replace(/'/g, `'\\''`)}'`);

/**
 * A POSIX sh script that answers like `nvidia-smi` for the simulated GPUs: the default table,
 * `-L`, and `--query-gpu=<fields> --format=csv[,noheader][,nounits]` (with no GPU, what the real
 * tool says then). Everything but the date is rendered here, so the script needs nothing beyond
 * sh, printf and date.
 */
export function nvidiaSmiScript(g: SimulatedGpus): string {
  if (g.count === 0) {
    // What the real tool says on a machine whose GPUs the driver does not see.
    return `#!/bin/sh
# Simulated nvidia-smi of a gpu-rental local instance (no GPU).
echo 'No devices were found'
exit 6
`;
  }
  const gpus = facts(g);
  const list = gpus.map((f) => `GPU ${f.index}: ${g.name} (UUID: ${f.uuid})`).join('\n');
  const valueCases: string[] = [];
  for (const f of gpus) {
    for (const q of queryFields(g, f)) {
      valueCases.push(`    ${q.names.map((n) => `"${f.index}:${n}"`).join('|')}) v=${sq(q.value)}; u=${sq(q.unit)} ;;`);
    }
  }
  const end = '__GPU_RENTAL_NVIDIA_SMI__';
  return `#!/bin/sh
# Simulated nvidia-smi of a gpu-rental local instance (${g.count} x ${g.name.replace(/[\r\n]/g, ' ')}).
GPU_COUNT=${g.count}

utilization() {
  u_v=$(head -n 1 "$HOME/${UTILIZATION_FILE}" 2>/dev/null | tr -cd '0-9' | cut -c1-3)
  if [ -n "$u_v" ] && [ "$u_v" -le 100 ]; then printf '%s' "$u_v"; else printf '0'; fi
}

lookup() {
  case "$1:$2" in
${valueCases.join('\n')}
    *) return 1 ;;
  esac
}

usage_error() {
  printf '%s\\n' "$1" "Please run 'nvidia-smi -h' for help." >&2
  exit 2
}

query=''
format=''
mode=table
while [ $# -gt 0 ]; do
  case "$1" in
    -L|--list-gpus) mode=list ;;
    --query-gpu=*) mode=query; query=\${1#--query-gpu=} ;;
    --query-gpu) mode=query; shift; query=\${1-} ;;
    --format=*) format=\${1#--format=} ;;
    --format) shift; format=\${1-} ;;
    -h|--help) printf '%s\\n' 'NVIDIA System Management Interface -- v${DRIVER_VERSION} (simulated)' '' 'Supported: nvidia-smi, nvidia-smi -L, nvidia-smi --query-gpu=<fields> --format=csv[,noheader][,nounits]'; exit 0 ;;
    *) usage_error "Invalid combination of input arguments." ;;
  esac
  shift
done

case "$mode" in
  table)
    date '+%a %b %e %H:%M:%S %Y'
    cat <<'${end}'
${table(g, gpus)}
${end}
    ;;
  list)
    cat <<'${end}'
${list}
${end}
    ;;
  query)
    [ -n "$format" ] || usage_error '"--format" must be specified with "--query-gpu".'
    header=1
    units=1
    old_ifs=$IFS
    IFS=,
    for opt in $format; do
      case "$opt" in
        csv) ;;
        noheader) header=0 ;;
        nounits) units=0 ;;
        *) IFS=$old_ifs; usage_error "Invalid format \\"$opt\\"." ;;
      esac
    done
    query=$(printf '%s' "$query" | tr -d ' ')
    [ -n "$query" ] || { IFS=$old_ifs; usage_error 'No fields to query.'; }
    for field in $query; do
      lookup 0 "$field" || { printf 'Field "%s" is not a valid field to query.\\n\\n' "$field"; exit 2; }
    done
    if [ $header = 1 ]; then
      line=''
      sep=''
      for field in $query; do
        lookup 0 "$field"
        if [ $units = 1 ] && [ -n "$u" ]; then line="$line$sep$field [$u]"; else line="$line$sep$field"; fi
        sep=', '
      done
      printf '%s\\n' "$line"
    fi
    i=0
    while [ $i -lt $GPU_COUNT ]; do
      line=''
      sep=''
      for field in $query; do
        lookup $i "$field"
        if [ $units = 1 ] && [ -n "$u" ] && [ "$v" != '[N/A]' ]; then
          line="$line$sep$v $u"
        else
          line="$line$sep$v"
        fi
        sep=', '
      done
      printf '%s\\n' "$line"
      i=$((i + 1))
    done
    IFS=$old_ifs
    ;;
esac
`;
}
