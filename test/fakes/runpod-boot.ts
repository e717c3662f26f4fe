// What a pod's container would do at its start when `args` runs a boot script carried in one of
// its variables (`sh -c '... printf %s $VAR | base64 -d > $f && exec sh $f'`): the fake cannot run
// that script here (it writes /etc/profile.d and starts sshd, and fake machines run as this host's
// root), so it reads what the script would leave behind instead: the pod's variables in every SSH
// session (the boot writes them where logins and `ssh host cmd` read them), and the startup script
// it writes out and runs once in the background.

/** What a pod's boot delivers to its machine. */
export interface PodBoot {
  /** The variables SSH sessions and the startup script have: the pod's, but for its key and the boot script itself. */
  env: Record<string, string>;
  /** The script the boot runs once; null when it runs none. */
  startupScript: string | null;
}

/** The variable a start command decodes and runs as a script, or null when `args` is no such command. */
export function bootVariableOf(args: string): string | null {
  const m = /printf %s "?\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?"? \| base64 -d/.exec(args);
  return m ? m[1] : null;
}

/**
 * The single-quoted shell word at `text[at]` (quoted runs and `\'` between them), and where it
 * ends; null when none starts there.
 */
export function singleQuotedWord(text: string, at: number): { value: string; end: number } | null {
  let i = at;
  let value = '';
  let any = false;
  for (;;) {
    if (text[i] === "'") {
      const close = text.indexOf("'", i + 1);
      if (close < 0) return null;
      value += text.slice(i + 1, close);
      i = close + 1;
    } else if (text.startsWith("\\'", i)) {
      value += "'";
      i += 2;
    } else break;
    any = true;
  }
  return any ? { value, end: i } : null;
}

/** The text a boot script writes to its startup wrapper (`printf '%s' '<script>' > "$HOME/.gpr/startup-wrapper.sh"`), or null. */
export function startupScriptOf(boot: string): string | null {
  const lead = "printf '%s' ";
  for (let at = boot.indexOf(lead); at >= 0; at = boot.indexOf(lead, at + 1)) {
    const word = singleQuotedWord(boot, at + lead.length);
    if (word && boot.startsWith(' > "$HOME/.gpr/startup-wrapper.sh"', word.end)) return word.value;
  }
  return null;
}

/** What the pod's boot delivers, or null when its start command runs no boot script of a variable. */
export function podBoot(env: Record<string, string>, args: string): PodBoot | null {
  const name = bootVariableOf(args);
  if (name === null || typeof env[name] !== 'string') return null;
  const boot = Buffer.from(env[name], 'base64').toString('utf8');
  const delivered = Object.fromEntries(Object.entries(env).filter(([k]) => k !== name && k !== 'PUBLIC_KEY'));
  return { env: delivered, startupScript: startupScriptOf(boot) };
}
