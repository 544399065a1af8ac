INSERT INTO runs (id, created_at, kind, model_path, target, iterations) VALUES (1, '2025-01-31T12:00:00Z', 'import', 'profile.json', 'ascend', 3);
INSERT INTO samples VALUES (1, 0, 3000), (1, 1, 3100), (1, 2, 2900);
INSERT INTO strings VALUES (1, 'ProfilerStep#0'), (2, 'aten::conv2d'), (3, 'aten::relu'), (4, 'Conv2D'), (5, 'HcclAllReduce');
INSERT INTO events VALUES (1, 0, -1, 0, 0, 1, 1000, 3000, 0, 0), (1, 0, -1, 0, 1, 2, 1100, 1500, 0, 1), (1, 0, -1, 0, 2, 3, 2700, 200, 0, 1);
INSERT INTO events VALUES (1, 0, -1, 1, 3, 1, 5000, 3100, 0, 0), (1, 0, -1, 1, 4, 2, 5100, 1600, 0, 1), (1, 0, -1, 1, 5, 3, 6800, 250, 7, 0);
INSERT INTO events VALUES (1, 0, -1, 2, 6, 1, 9000, 2900, 0, 0), (1, 0, -1, 2, 7, 2, 9100, 1400, 0, 1), (1, 0, -1, 2, 8, 3, 10600, 210, 0, 1);
INSERT INTO kernels VALUES (1, 0, 'Conv2D', 'Conv2D', 'aicore', '["conv1","bn1"]', '[]', '[]', 0, 0), (1, 1, 'HcclAllReduce', 'HcclAllReduce', 'hccl', '["allreduce"]', '[]', '[]', 0, 0);
INSERT INTO events VALUES (1, 2, 0, 0, 9, 4, 1200, 1000, 1, 0), (1, 2, 1, 0, 10, 5, 2300, 600, 2, 0), (1, 2, 0, 1, 11, 4, 5200, 1000, 1, 0), (1, 2, 1, 1, 12, 5, 6300, 650, 2, 0), (1, 2, 0, 2, 13, 4, 9200, 950, 1, 0), (1, 2, 1, 2, 14, 5, 10300, 580, 2, 0);
