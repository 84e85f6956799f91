/**
 * Just enough of a browser for the test OpenID provider's pages (test/support/oidc-provider.mjs):
 * cookies by name and path, manual redirects, form posts.
 */
export class FormBrowser {
  private readonly cookies = new Map<string, { name: string; value: string; path: string }>();

  async request(url: string, form?: Record<string, string>): Promise<Response> {
    const u = new URL(url);
    const cookie = [...this.cookies.values()]
      .filter((c) => u.pathname.startsWith(c.path))
      .map((c) => `${c.name}=${c.value}`)
      .join('; ');
    const res = await fetch(url, {
      method: form ? 'POST' : 'GET',
      redirect: 'manual',
      headers: {
        ...(cookie ? { cookie } : {}),
        ...(form ? { 'content-type': 'application/x-www-form-urlencoded' } : {}),
      },
      body: form ? new URLSearchParams(form).toString() : undefined,
    });
    for (const header of res.headers.getSetCookie()) {
      const [pair, ...attrs] = header.split(';').map((s) => s.trim());
      const eq = pair.indexOf('=');
      const name = pair.slice(0, eq);
      const value = pair.slice(eq + 1);
      const pathAttr = attrs.find((a) => a.toLowerCase().startsWith('path='));
      const path = pathAttr ? pathAttr.slice(5) : '/';
      const expired =
        attrs.some((a) => /^max-age=0$/i.test(a)) ||
        attrs.some(
          (a) => a.toLowerCase().startsWith('expires=') && Date.parse(a.slice(8)) < Date.now(),
        );
      const key = `${name}\0${path}`;
      if (expired || value === '') this.cookies.delete(key);
      else this.cookies.set(key, { name, value, path });
    }
    return res;
  }

  /**
   * Follows the provider's pages (login form, consent form) as a person would, and returns the
   * URL the provider finally redirects to on the CLI's loopback listener (not requested) — or
   * the first redirect to a URL starting with `stopAt`.
   */
  async authorize(
    start: URL,
    login: string,
    stopAt = start.searchParams.get('redirect_uri') as string,
  ): Promise<string> {
    const redirectUri = stopAt;
    const seen: string[] = [];
    let url = start.toString();
    let form: Record<string, string> | undefined;
    for (let step = 0; step < 20; step++) {
      const res = await this.request(url, form);
      seen.push(`${form ? 'POST' : 'GET'} ${url} → ${res.status}`);
      form = undefined;
      if (res.status >= 300 && res.status < 400) {
        const next = new URL(res.headers.get('location') as string, url).toString();
        await res.body?.cancel();
        if (next.startsWith(redirectUri)) return next;
        url = next;
        continue;
      }
      const html = await res.text();
      const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1];
      const prompt = /name="prompt" value="([^"]+)"/.exec(html)?.[1];
      if (res.status !== 200 || !action || !prompt) {
        throw new Error(`unexpected page:\n${seen.join('\n')}\n${html.slice(0, 2000)}`);
      }
      url = new URL(action.replace(/&amp;/g, '&'), url).toString();
      form = prompt === 'login' ? { prompt, login, password: 'any' } : { prompt };
    }
    throw new Error(`the provider never redirected back:\n${seen.join('\n')}`);
  }
}
