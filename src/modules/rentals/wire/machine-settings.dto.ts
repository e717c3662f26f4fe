/**
 * A TCP port of the machine to expose over HTTP(S): 1 to 65535, not 22 (SSH's own).
 * @isInt
 * @minimum 1
 * @maximum 65535
 */
export type ExposedPort = number;

/**
 * What should run on the machine, beyond the offer's defaults. Every property is optional; an
 * offer honours only what its `capabilities` declare (`env` always), and a rental asking for
 * more than its offer can do is refused with 422 naming the setting. The variables' values and
 * the startup script are secrets: sealed at rest, never logged and never returned (reads show
 * only the variable names and the script's SHA-256).
 */
export interface MachineSettingsRequest {
  /**
   * Container image to run instead of the provider's default, as `registry/path:tag` or
   * `path@sha256:…` (no spaces or shell characters); the service may allow only some images.
   * Needs an offer whose `capabilities.customImage` is true. Omit it for the default image.
   * @minLength 1
   * @maxLength 512
   * @example "pytorch/pytorch:2.4.0-cuda12.4-cudnn9-runtime"
   */
  image?: string;
  /**
   * Environment variables of the machine's processes, the startup script and SSH logins, on
   * every offer. Names: upper-case letters, digits and `_`, not starting with a digit. At most
   * 50 variables, each value at most 4,096 bytes, names and values 32,768 bytes in all (UTF-8).
   * The values are secrets: sealed at rest, never returned (reads show only the names).
   * @example {"HF_TOKEN": "hf_example", "MODEL_ID": "meta-llama/Llama-3.1-8B"}
   */
  env?: { [name: string]: string };
  /**
   * A script run once after boot as the machine's SSH user, in the background, with `env` set;
   * its output goes to `~/.gpr/startup.log`. A first line `#!/bin/bash` (or any interpreter)
   * chooses the interpreter, else it runs under `sh`. At most 16,384 bytes (UTF-8), not empty.
   * The rental becomes ACTIVE once the script has started, not when it ends. Needs an offer whose
   * `capabilities.startupScript` is true. A secret: sealed at rest, never returned (reads show
   * its SHA-256).
   * @maxLength 16384
   * @example "#!/bin/bash\npip install vllm && vllm serve \"$MODEL_ID\" --port 8000\n"
   */
  startupScript?: string;
  /**
   * TCP ports to expose over HTTP(S), each 1 to 65535, not 22 (SSH is already reachable), no
   * repeats. Once ACTIVE the rental's `endpoints` give each port's URL. At most 5, and no more
   * than the offer's `capabilities.ports`.
   * @maxItems 5
   * @example [8000]
   */
  ports?: ExposedPort[];
  /**
   * Disk of the machine in GB, at least 1; at most the offer's `capabilities.maxDiskGb` (an offer
   * whose `maxDiskGb` is null cannot choose its disk) and the service's own maximum. Omit it for
   * the offer's default disk.
   * @isInt
   * @minimum 1
   * @example 200
   */
  diskGb?: number;
}
