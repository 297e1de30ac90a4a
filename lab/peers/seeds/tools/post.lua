-- NextRush's POST JSON scenario for wrk: every request a POST with the suite's JSON body.
wrk.method = "POST"
wrk.body = '{"name":"John Doe","email":"john@example.com"}'
wrk.headers["Content-Type"] = "application/json"
