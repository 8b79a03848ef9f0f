import { useSyncExternalStore, type AnchorHTMLAttributes, type MouseEvent } from "react";

/** Client routes live under /ui/; the daemon also serves the app at /. */
export const BASE = "/ui";

export type Route = "chat" | "playground" | "models" | "metrics" | "settings" | "logs";
export const ROUTES: Route[] = ["chat", "playground", "models", "metrics", "settings", "logs"];

/** The page for a location path; unknown paths are null (the app shows "not found"). */
export function routeOf(pathname: string): Route | null {
  const rest = pathname.startsWith(BASE) ? pathname.slice(BASE.length) : pathname;
  const first = rest.split("/").filter(Boolean)[0];
  if (first === undefined) return "chat";
  return (ROUTES as string[]).includes(first) ? (first as Route) : null;
}

const listeners = new Set<() => void>();

function subscribe(listener: () => void): () => void {
  listeners.add(listener);
  window.addEventListener("popstate", listener);
  return () => {
    listeners.delete(listener);
    window.removeEventListener("popstate", listener);
  };
}

export function navigate(route: Route): void {
  window.history.pushState(null, "", `${BASE}/${route}`);
  listeners.forEach((l) => l());
}

export function useRoute(): Route | null {
  return routeOf(useSyncExternalStore(subscribe, () => window.location.pathname));
}

/** A link to a page: a real href (open in new tab works), client-side on plain click. */
export function Link({ to, ...rest }: { to: Route } & AnchorHTMLAttributes<HTMLAnchorElement>) {
  const onClick = (e: MouseEvent<HTMLAnchorElement>) => {
    if (e.button !== 0 || e.metaKey || e.ctrlKey || e.shiftKey || e.altKey) return;
    e.preventDefault();
    navigate(to);
  };
  return <a href={`${BASE}/${to}`} onClick={onClick} {...rest} />;
}
