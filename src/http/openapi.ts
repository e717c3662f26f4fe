import spec from '../generated/swagger.json' with { type: 'json' };

/** The tsoa-generated contract, with this deployment's base URL as its server. */
export function openApiDocument(publicBaseUrl: string): Record<string, unknown> {
  return {
    ...spec,
    info: { ...(spec as { info: object }).info, version: 'v1' },
    servers: [{ url: publicBaseUrl }],
  };
}
