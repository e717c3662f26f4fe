// What cloud-init leaves on a fake Lambda machine from a launch's `user_data`. Lambda's cloud-init
// runs a `#!` user-data script once, as root, late in the first boot. The fake does not run it on
// this host (it writes /etc/profile.d and the user's ~/.bashrc, and calls `su`); it reads what the
// script delivers instead: the files it decodes (`echo '<base64>' | base64 -d > <path>`), of which
// one under /etc/profile.d is what the user's logins and SSH commands read, and one it hands to
// `su - <user> -c "... sh $script"` is what it runs as the user after reading that profile.

/** What a launch's `user_data` delivers to its machine. */
export interface CloudInitBoot {
  /** The profile text the user's logins and SSH commands read; '' when none. */
  profile: string;
  /** The script run once as the user; null when none. */
  startupScript: string | null;
}

const DECODED = /^echo '([A-Za-z0-9+/=]*)' \| base64 -d > (\S+)$/;
const RUN_AS_USER = /^su - [a-z_][a-z0-9_-]* -c "[^"]*\bsh \$(\w+)"$/;

/** The profile and script a `#!/bin/sh` user_data delivers, as far as the fake can tell; null for any other `user_data`. */
export function cloudInitBoot(userData: string | undefined): CloudInitBoot | null {
  if (!userData?.startsWith('#!')) return null;
  const files = new Map<string, string>();
  let ran: string | null = null;
  for (const line of userData.split('\n')) {
    const d = DECODED.exec(line);
    if (d) files.set(d[2], Buffer.from(d[1], 'base64').toString('utf8'));
    const r = RUN_AS_USER.exec(line);
    if (r) ran = `"$${r[1]}"`;
  }
  const profile = [...files]
    .filter(([path]) => path.startsWith('/etc/profile.d/'))
    .map(([, text]) => text)
    .join('');
  return { profile, startupScript: ran === null ? null : (files.get(ran) ?? null) };
}
