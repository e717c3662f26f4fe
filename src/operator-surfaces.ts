import type { JobsConfig, MetricsConfig, Role } from './config.js';

/**
 * The operator's surfaces this process does not serve, each with the settings that turn it on:
 * they are off unless asked for, and an operator looking for them should not have to guess.
 */
export function offSurfaces(
  config: {
    metrics: Pick<MetricsConfig, 'port' | 'token'>;
    jobs: Pick<JobsConfig, 'dashboardUser' | 'dashboardPassword'>;
  },
  roles: readonly Role[],
): string[] {
  const lines: string[] = [];
  if (!config.metrics.token && !config.metrics.port) {
    lines.push(
      'metrics are off: set METRICS_TOKEN to serve /metrics on this port to that bearer token, or METRICS_PORT to serve them on a port of their own',
    );
  }
  if (roles.includes('api') && !(config.jobs.dashboardUser && config.jobs.dashboardPassword)) {
    lines.push('the jobs dashboard is off: set ADMIN_JOBS_USER and ADMIN_JOBS_PASSWORD to serve it at /admin/jobs');
  }
  return lines;
}
