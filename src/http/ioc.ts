import type { IocContainer, IocContainerFactory, ServiceIdentifier } from '@tsoa/runtime';
import type { Express, Request } from 'express';

/** A controller class, as tsoa names it when it asks for an instance. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type ControllerClass<T extends object = object> = abstract new (...args: any[]) => T;

/**
 * How one app builds each of its controllers, each with only the services it uses. tsoa asks for
 * a fresh controller per request (a controller holds that request's status and headers).
 */
export class ControllerFactories implements IocContainer {
  private readonly factories = new Map<ServiceIdentifier, () => object>();

  /** Registers how to build `controller`; a class is registered once. */
  add<T extends object>(controller: ControllerClass<T>, build: () => T): this {
    if (this.factories.has(controller)) throw new Error(`${controller.name} is registered twice`);
    this.factories.set(controller, build);
    return this;
  }

  /** Whether `controller` can be built. */
  has(controller: ControllerClass): boolean {
    return this.factories.has(controller);
  }

  get<T>(controller: ServiceIdentifier<T>): T;
  get<T>(controller: ServiceIdentifier<T>): Promise<T>;
  get<T>(controller: ServiceIdentifier<T>): T {
    const build = this.factories.get(controller);
    if (!build)
      throw new Error(`no controller factory for ${String((controller as { name?: string }).name ?? controller)}`);
    return build() as T;
  }
}

/** Gives an app the controllers its generated routes use (one set per app, so tests may run several). */
export function useControllers(app: Express, controllers: ControllerFactories): void {
  app.locals.controllers = controllers;
}

/** tsoa's IoC module: the controllers of the app that received the request. */
export const iocContainer: IocContainerFactory<Request> = (req: Request): IocContainer =>
  req.app.locals.controllers as ControllerFactories;
