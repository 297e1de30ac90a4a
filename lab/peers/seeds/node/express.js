'use strict';
// Express 5 as NextRush's benchmark app (SEED=nextrush): res.json, express.json() on POST.

const { need, addr, seed } = require('./shape');

seed(['nextrush']);
const express = need('express');
const app = express();
app.get('/', (req, res) => res.json({ message: 'Hello World' }));
app.get('/text', (req, res) => res.send('Hello World'));
app.get('/users/:id', (req, res) => res.json({ id: req.params.id }));
app.get('/search', (req, res) => res.json({ q: req.query.q }));
app.post('/users', express.json(), (req, res) => res.status(201).json(req.body));
const { host, port } = addr();
app.listen(port, host);
