import type { IocContainer, IocContainerFactory } from '@tsoa/runtime';
import type { Request } from 'express';
import type { Services } from '../container.js';

/**
 * tsoa resolves controllers per request; each controller takes the app's Services, so tests
 * can build several apps on different databases in one process.
 */
export const iocContainer: IocContainerFactory<Request> = (req: Request): IocContainer => ({
  get: <T>(controller: unknown): T => {
    const Ctor = controller as new (services: Services) => T;
    return new Ctor(req.app.locals.services as Services);
  },
});
