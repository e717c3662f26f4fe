/**
 * A reader of the subset of Dockerfile syntax the service's Dockerfile uses, for the test that
 * checks it and the rehearsal that carries out its steps without a container engine: comments,
 * line continuations, global ARGs with defaults (substituted into FROM), and one instruction per
 * logical line, grouped into stages.
 */
export interface Instruction {
  /** Upper-case keyword: FROM, RUN, COPY, ... */
  op: string;
  /** Everything after the keyword, continuations joined with a space. */
  args: string;
  line: number;
}

export interface Stage {
  name: string;
  /** The base image after ARG substitution. */
  image: string;
  instructions: Instruction[];
}

export interface Dockerfile {
  args: Record<string, string>;
  stages: Stage[];
}

function logicalLines(text: string): Instruction[] {
  const out: Instruction[] = [];
  let buf = '';
  let start = 0;
  text.split('\n').forEach((raw, i) => {
    const line = raw.trimEnd();
    if (buf === '' && (line.trim() === '' || line.trimStart().startsWith('#'))) return;
    if (buf !== '' && line.trimStart().startsWith('#')) return;
    if (buf === '') start = i + 1;
    if (line.endsWith('\\')) {
      buf += `${line.slice(0, -1).trim()} `;
      return;
    }
    buf += line.trim();
    const m = /^(\S+)\s*(.*)$/s.exec(buf)!;
    out.push({ op: m[1].toUpperCase(), args: m[2].trim(), line: start });
    buf = '';
  });
  if (buf !== '') throw new Error(`line ${start}: a continuation runs off the end of the file`);
  return out;
}

function substitute(s: string, args: Record<string, string>): string {
  return s.replace(/\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?/g, (whole, name: string) => args[name] ?? whole);
}

/** Parses `text`; throws on an instruction before the first FROM other than ARG. */
export function parseDockerfile(text: string): Dockerfile {
  const args: Record<string, string> = {};
  const stages: Stage[] = [];
  for (const ins of logicalLines(text)) {
    if (ins.op === 'FROM') {
      const m = /^(?:--platform=\S+\s+)?(\S+)(?:\s+AS\s+(\S+))?$/i.exec(ins.args);
      if (!m) throw new Error(`line ${ins.line}: cannot read FROM ${ins.args}`);
      stages.push({ name: m[2] ?? String(stages.length), image: substitute(m[1], args), instructions: [] });
    } else if (stages.length === 0) {
      if (ins.op !== 'ARG') throw new Error(`line ${ins.line}: ${ins.op} before the first FROM`);
      const [name, ...value] = ins.args.split('=');
      args[name.trim()] = value.join('=').trim();
    } else {
      stages.at(-1)!.instructions.push(ins);
    }
  }
  return { args, stages };
}

/** The JSON array of an exec-form instruction (CMD ["a"]), or undefined for the shell form. */
export function execForm(args: string): string[] | undefined {
  if (!args.startsWith('[')) return undefined;
  const v: unknown = JSON.parse(args);
  if (!Array.isArray(v) || !v.every((x) => typeof x === 'string')) throw new Error(`not an exec form: ${args}`);
  return v;
}

/** `ENV A=1 B=2` (or the old `ENV A 1`) as pairs, with quotes removed. */
export function envPairs(args: string): Record<string, string> {
  const out: Record<string, string> = {};
  if (!args.includes('=')) {
    const [k, ...v] = args.split(/\s+/);
    out[k] = v.join(' ');
    return out;
  }
  for (const m of args.matchAll(/([A-Za-z_][A-Za-z0-9_]*)=("(?:[^"\\]|\\.)*"|\S*)/g))
    out[m[1]] = m[2].replace(/^"(.*)"$/s, '$1');
  return out;
}

export interface Copy {
  from?: string;
  sources: string[];
  dest: string;
}

/** A COPY's flags and paths (the shell form; --chown and --chmod are read and set aside). */
export function copyOf(args: string): Copy {
  const words = args.split(/\s+/);
  let from: string | undefined;
  while (words[0]?.startsWith('--')) {
    const flag = words.shift()!;
    if (flag.startsWith('--from=')) from = flag.slice('--from='.length);
  }
  if (words.length < 2) throw new Error(`COPY needs a source and a destination: ${args}`);
  return { from, sources: words.slice(0, -1), dest: words.at(-1)! };
}
