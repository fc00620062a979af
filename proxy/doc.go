// Package proxy is nginx's ngx_http_proxy_module on the HTTP core: the proxy_*
// directives and the exchange with the upstream. proxy_pass makes a location's
// content handler the proxy's (content.go); it builds the upstream request
// (forward.go), connects through the upstream group's balancer with
// proxy_next_upstream's retries and a per-loop keep-alive pool (backend.go,
// idle.go), streams the request body up and the response back with backpressure
// both ways, rewrites the response head (headers.go, cookie.go) and hands it to the
// core's filters, which frame it for the client. An upstream's X-Accel-Redirect and
// proxy_intercept_errors become the core's internal redirects and error pages. A
// proxy_pass made of variables picks its target for each request (target.go): an
// upstream block, an address, or a name looked up with the location's resolver;
// an upstream block whose servers follow DNS has a version per loop that its
// lookups renew (live.go). It
// declares $proxy_host, $proxy_add_x_forwarded_for and the $upstream_ variables.
package proxy
