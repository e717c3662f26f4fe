import type { Config, Role } from './config.js';

/**
 * The operator's surfaces this process does not serve, each with the settings that turn it on:
 * they are off unless asked for, and an operator looking for them should not have to guess.
 */
export function offSurfaces(
  config: Pick<Config, 'metricsToken' | 'metricsPort' | 'adminJobsUser' | 'adminJobsPassword'>,
  roles: readonly Role[],
): string[] {
  const lines: string[] = [];
  if (!config.metricsToken && !config.metricsPort) {
    lines.push(
      'metrics are off: set METRICS_TOKEN to serve /metrics on this port to that bearer token, or METRICS_PORT to serve them on a port of their own',
    );
  }
  if (roles.includes('api') && !(config.adminJobsUser && config.adminJobsPassword)) {
    lines.push('the jobs dashboard is off: set ADMIN_JOBS_USER and ADMIN_JOBS_PASSWORD to serve it at /admin/jobs');
  }
  return lines;
}
