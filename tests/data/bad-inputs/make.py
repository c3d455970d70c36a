"""Writes the bad-input corpus in this folder: model files, training configs, MNIST-like IDX
data sets, sentiment trees, and cases.tsv, which scripts/bad-inputs.sh runs. Every case is
an input a user could write from docs/ that pens must refuse with one line naming the
place. Run from anywhere: python3 tests/data/bad-inputs/make.py; then
  build/pens new mlp --layers 784,4,10 --values 3 --output tests/data/bad-inputs/configs/trained.model.json
writes the trained model the eval cases read."""
import copy, json, os, random, shutil, struct

root = os.path.dirname(os.path.abspath(__file__))
repo = os.path.normpath(os.path.join(root, '..', '..', '..'))
for d in ['models', 'configs', 'data', 'trees', 'paths']:
    shutil.rmtree(os.path.join(root, d), ignore_errors=True)
for d in ['models','configs','data','trees']:
    os.makedirs(f'{root}/{d}', exist_ok=True)
base = json.load(open(f'{repo}/tests/data/models/tiny-ensemble.json'))
cases = []
def case(name, expect, args):
    assert '\t' not in expect and '\t' not in args
    cases.append((name, expect, args))
def model(name, doc=None, text=None, expect='', command='fmt'):
    path = f'models/{name}.json'
    with open(f'{root}/{path}', 'wb') as f:
        f.write(text if text is not None else json.dumps(doc, indent=1).encode())
    case(f'model/{name}', expect, f'{command} {path}')
def node(doc, name):
    for n in doc['inputs'] + doc['nodes'] + doc['parameters']:
        if n['name'] == name: return n
    raise KeyError(name)
def variant(f):
    d = copy.deepcopy(base); f(d); return d

model('mask-p-above-1', variant(lambda d: node(d,'x')['noise'][0].update(p=1.5)), expect='/inputs/0/noise/0')
model('mask-p-negative', variant(lambda d: node(d,'h1')['noise'][0].update(p=-0.1)), expect='/nodes/1/noise/0')
model('mask-p-1-rescaled', variant(lambda d: node(d,'x')['noise'][0].update(p=1.0)), expect='/inputs/0/noise/0')
model('gaussian-sigma-negative', variant(lambda d: node(d,'a1')['noise'][0].update(sigma=-1)), expect='/nodes/0/noise/0')
model('init-std-negative', variant(lambda d: node(d,'W1')['init'].update(std=-0.01)), expect='/parameters/0')
model('init-uniform-limit-negative', variant(lambda d: node(d,'W1').update(init={'kind':'uniform','limit':-1})), expect='/parameters/0')
model('init-value-beyond-float', variant(lambda d: node(d,'b1')['init'].update(value=1e39)), expect='/parameters/1')
model('subspace-keep-0', variant(lambda d: node(d,'W1').update(noise=[{'kind':'subspace','group':'h1','keep':0,'axes':[1]}])), expect='/parameters/0/noise/0')
model('subspace-keep-beyond-group', variant(lambda d: node(d,'W1').update(noise=[{'kind':'subspace','group':'h1','keep':9,'axes':[1]}])), expect='/parameters/0')
model('subspace-axis-beyond-rank', variant(lambda d: node(d,'W1').update(noise=[{'kind':'subspace','group':'h1','keep':2,'axes':[5]}])), expect='/parameters/0')
model('max-norm-negative', variant(lambda d: node(d,'W1').update(max_norm=-3)), expect='/parameters/0')
model('penalty-on-index-input', variant(lambda d: d['pseudo_ensemble']['penalties'].append({'kind':'kl','lambda':1,'node':'y','rows':'all'})), expect='/pseudo_ensemble/penalties/2')
model('penalty-on-scalar-loss', variant(lambda d: d['pseudo_ensemble']['penalties'].append({'kind':'direction','lambda':1,'node':'loss','rows':'all'})), expect='/pseudo_ensemble/penalties/2')
model('penalty-lambda-negative', variant(lambda d: d['pseudo_ensemble']['penalties'][0].update({'lambda':-1})), expect='/pseudo_ensemble/penalties/0')
model('outputs-empty', variant(lambda d: d.update(outputs=[])), expect='/outputs')
model('unknown-op', variant(lambda d: node(d,'h1').update(op='gelu')), expect='/nodes/1')
model('unknown-noise-kind', variant(lambda d: node(d,'h1')['noise'][0].update(kind='cutout')), expect='/nodes/1/noise/0')
model('shape-mismatch', variant(lambda d: node(d,'W2').update(shape=[4,2])), expect="'logits'")
model('duplicate-name', variant(lambda d: d['nodes'].append(copy.deepcopy(node(d,'h1')))), expect="'h1'")
model('cycle', variant(lambda d: node(d,'a1').update(inputs=['logits','W1','b1'])), expect='cycle')
model('input-missing', variant(lambda d: node(d,'logits').update(inputs=['h9','W2','b2'])), expect="'h9'")
model('children-0', variant(lambda d: d['pseudo_ensemble'].update(children=0)), expect='/pseudo_ensemble/children')
model('shape-rank-5', variant(lambda d: node(d,'W1').update(shape=[4,3,1,1,1])), expect='/parameters/0')
model('shape-negative', variant(lambda d: node(d,'W1').update(shape=[4,-3])), expect='/parameters/0')
model('format-version-99', variant(lambda d: d.update(format_version=99)), expect='format_version')
model('constant-of-terabytes', variant(lambda d: d['nodes'].append({'name': 'huge', 'op': 'constant', 'attrs': {'shape': [1000000, 1000000], 'value': 0.0}})), expect="node 'huge' holds")
model('constant-of-rank-3-terabytes', variant(lambda d: d['nodes'].append({'name': 'cube', 'op': 'constant', 'attrs': {'shape': [100000, 100000, 1000], 'value': 0.0}})), expect="node 'cube' holds")
model('product-of-terabytes', variant(lambda d: d['nodes'].extend([
    {'name': 'tall', 'op': 'constant', 'attrs': {'shape': [1000000, 4], 'value': 1.0}},
    {'name': 'outer', 'op': 'matmul', 'inputs': ['tall', 'wide']}]) or d['parameters'].append(
    {'name': 'wide', 'shape': [4, 1000000], 'dtype': 'float32', 'init': {'kind': 'normal', 'std': 0.01}})), expect="node 'outer' holds")
model('noise-on-loss-flag-typo', variant(lambda d: node(d,'loss').update(flags=['los'])), expect='/nodes/')
good = json.dumps(base, indent=1).encode()
model('text-after-document', text=good + b'\n{"more": 1}\n', expect=':')
model('nul-after-document', text=good + b'\x00\x00', expect=':')
model('invalid-utf8', text=good.replace(b'4-3-2 pseudo-ensemble', b'4-3-2 \xff\xfe ensemble'), expect=':')
model('number-beyond-double', text=good.replace(b'"std": 0.01', b'"std": 1e400', 1), expect=':')
model('empty-file', text=b'', expect='empty')
model('deep-nesting', text=b'[' * 200 + b']' * 200, expect=':')
model('unclosed', text=good[:len(good)//2], expect=':')
model('bare-word', text=b'{"format_version": one}', expect=':')
model('not-an-object', text=b'[1, 2, 3]', expect='')
model('huge-width-gradcheck', variant(lambda d: (node(d,'W1').update(shape=[4, 2000000000]))), expect='/parameters/0', command='gradcheck')
model('wide-needs-memory', text=None, doc=variant(lambda d: (node(d,'W1').update(shape=[4, 300000000]), node(d,'b1').update(shape=[300000000]), node(d,'W2').update(shape=[300000000, 2]))), expect='memory limit', command='gradcheck')

# MNIST-like data: a tiny valid set and broken variants.
def idx(dims, data, typ=8):
    return bytes([0,0,typ,len(dims)]) + b''.join(struct.pack('>I', x) for x in dims) + bytes(data)
rng = random.Random(1)
def write_set(dirname, train_images=None, train_labels=None, n=40, side=28, test_n=10):
    d = f'{root}/data/{dirname}'
    os.makedirs(d, exist_ok=True)
    ti = train_images if train_images is not None else idx([n, side, side], [rng.randrange(256) for _ in range(n*side*side)])
    tl = train_labels if train_labels is not None else idx([n], [i % 10 for i in range(n)])
    open(f'{d}/train-images-idx3-ubyte','wb').write(ti)
    open(f'{d}/train-labels-idx1-ubyte','wb').write(tl)
    open(f'{d}/t10k-images-idx3-ubyte','wb').write(idx([test_n, side, side], [rng.randrange(256) for _ in range(test_n*side*side)]))
    open(f'{d}/t10k-labels-idx1-ubyte','wb').write(idx([test_n], [i % 10 for i in range(test_n)]))
write_set('good')
good_images = open(f'{root}/data/good/train-images-idx3-ubyte','rb').read()
write_set('truncated-images', train_images=good_images[:-100])
write_set('trailing-bytes', train_images=good_images + b'\x00' * 7)
write_set('gzip-images', train_images=b'\x1f\x8b\x08\x00' + good_images[:500])
write_set('wrong-rank', train_images=idx([40, 784], good_images[16:]))
write_set('wrong-type', train_images=idx([40, 28, 28], good_images[16:], typ=0x0d))
write_set('label-count-mismatch', train_labels=idx([25], [i % 10 for i in range(25)]))
write_set('label-beyond-9', train_labels=idx([40], [12 if i == 17 else i % 10 for i in range(40)]))
write_set('small-images', side=10)
write_set('empty-images', train_images=b'')
write_set('header-promises-terabytes', train_images=bytes([0,0,8,3]) + struct.pack('>III', 4000000, 1000, 1000) + good_images[16:])

# A model that fits the data, and configs.
mlp = json.load(open(f'{repo}/examples/mnist/pea-xent.model.json'))
json.dump(mlp, open(f'{root}/configs/mlp.model.json', 'w'), indent=1)
# Paths in a config are read from its folder (configs/).
good_config = {"model": "mlp.model.json", "data": {"dir": "../data/good", "labeled": 10, "validation": 5},
               "batch": {"labeled": 10, "unlabeled": 10}, "run": {"epochs": 1, "steps_per_epoch": 2, "threads": 1},
               "eval": {"batch": 10}}
def config(name, change=None, text=None, expect='', extra=''):
    c = copy.deepcopy(good_config)
    if change: change(c)
    path = f'configs/{name}.json'
    with open(f'{root}/{path}', 'wb') as f:
        f.write(text if text is not None else json.dumps(c, indent=1).encode())
    case(f'config/{name}', expect, f'train {path} --out {{out}}{extra}')
config('unknown-field', lambda c: c['run'].update(epoks=3), expect='run.epoks')
config('misspelt-section', lambda c: c.update(optimiser={}), expect='optimiser')
config('learning-rate-negative', lambda c: c.update(optimizer={'learning_rate': -0.1}), expect='optimizer.learning_rate')
config('learning-rate-string', lambda c: c.update(optimizer={'learning_rate': '0.1'}), expect='optimizer.learning_rate')
config('momentum-above-1', lambda c: c.update(optimizer={'momentum_end': 1.5}), expect='optimizer.momentum_end')
config('decay-nan-like', text=json.dumps(good_config).replace('"epochs": 1', '"epochs": NaN').encode(), expect=':')
config('batch-0', lambda c: c['batch'].update(labeled=0), expect='batch.labeled')
config('batch-fraction', lambda c: c['batch'].update(labeled=2.5), expect='batch.labeled')
config('batch-needs-memory', lambda c: c['batch'].update(labeled=1000000, unlabeled=1000000), expect='memory limit')
config('budget-negative', lambda c: c['run'].update(budget_minutes=-5), expect='run.budget_minutes')
config('threads-5000', lambda c: c['run'].update(threads=5000), expect='run.threads')
config('epochs-0', lambda c: c['run'].update(epochs=0), expect='run.epochs')
config('seed-negative', lambda c: c['run'].update(seed=-1), expect='run.seed')
config('lambda-schedule-object', lambda c: c.update(lambda_schedule={'epochs': 1}), expect='lambda_schedule')
config('lambda-stage-negative', lambda c: c.update(lambda_schedule=[{'epochs': 1, 'scale': -1}]), expect='lambda_schedule[0].scale')
config('optimizer-unknown', lambda c: c.update(optimizer={'kind': 'adamw'}), expect="'adamw'")
config('optimizer-setting-unknown', lambda c: c.update(optimizer={'kind': 'adagrad', 'beta': 0.9}), expect='optimizer.beta')
config('max-norm-rule-unknown', lambda c: c.update(optimizer={'max_norm_rule': 'rows'}), expect="'rows'")
config('no-model', lambda c: c.pop('model'), expect='names no model')
config('model-missing-file', lambda c: c.update(model='nowhere.model.json'), expect='model-missing-file.json: model: ')
config('model-is-a-folder', lambda c: c.update(model='.'), expect='not a regular file')
config('labeled-beyond-data', lambda c: c['data'].update(labeled=5000), expect='labeled')
config('validation-beyond-data', lambda c: c['data'].update(validation=100000), expect='validation')
config('labeled-not-per-class', lambda c: c['data'].update(labeled=25), expect='labeled-not-per-class.json: data.labeled')
config('data-dir-missing', lambda c: c['data'].update(dir='../data/none'), expect='no such file')
# Written as before 2026-11-29, relative to the working directory (the corpus).
config('data-dir-from-working-directory', lambda c: c['data'].update(dir='data/good'), expect='working directory')
# A network whose loss node lost its flag: nothing to train.
raw = json.load(open(f'{repo}/examples/mnist/raw.model.json'))
for raw_node in raw['nodes']:
    raw_node.pop('flags', None)
json.dump(raw, open(f'{root}/configs/no-loss.model.json', 'w'), indent=1)
config('model-marks-no-loss', lambda c: (c.update(model='no-loss.model.json'), c['batch'].update(unlabeled=0)),
       expect='no node is marked as a loss')
config('text-after-config', text=json.dumps(good_config).encode() + b' trailing', expect=':')
config('empty-config', text=b'', expect='empty')
config('config-is-array', text=b'[]', expect='')
for name in ['truncated-images', 'trailing-bytes', 'gzip-images', 'wrong-rank', 'wrong-type', 'label-count-mismatch',
             'label-beyond-9', 'small-images', 'empty-images', 'header-promises-terabytes']:
    config(f'data-{name}', lambda c, name=name: c['data'].update(dir=f'../data/{name}'), expect='idx' if name != 'small-images' else '784')
# The npy data source: a valid pair of NumPy arrays (numpy.save's layout), and broken ones.
def npy(descr, shape, data, fortran='False'):
    dims = ', '.join(str(d) for d in shape) + (',' if len(shape) == 1 else '')
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }" % (descr, fortran, dims)
    header += ' ' * ((64 - (10 + len(header) + 1) % 64) % 64) + '\n'
    return b'\x93NUMPY\x01\x00' + struct.pack('<H', len(header)) + header.encode() + data
# Four features an example: every case is refused while its arrays are read.
npy_x = npy('<f4', [40, 4], struct.pack('<160f', *[rng.random() for _ in range(160)]))
npy_y = npy('<i8', [40], struct.pack('<40q', *[i % 10 for i in range(40)]))
for name, x, y in [
    ('good', npy_x, npy_y),
    ('truncated-features', npy_x[:-10], npy_y),
    ('not-npy', b'PK\x03\x04 a zip file', npy_y),
    ('big-endian', npy('>f4', [40, 4], npy_x[128:]), npy_y),
    ('fortran-order', npy('<f4', [40, 4], npy_x[128:], 'True'), npy_y),
    ('labels-fractional', npy_x, npy('<f8', [40], struct.pack('<40d', *[i % 10 + 0.5 for i in range(40)]))),
    ('labels-below-minus-1', npy_x, npy('<i8', [40], struct.pack('<40q', *[-3] * 40))),
    ('label-count-mismatch', npy_x, npy('<i8', [30], struct.pack('<30q', *[0] * 30))),
    ('features-nan', npy('<f4', [40, 4], struct.pack('<f', float('nan')) + npy_x[132:]), npy_y),
    ('structured-dtype', npy_x.replace(b"'<f4'", b"[('a'"), npy_y),
]:
    os.makedirs(f'{root}/data/npy-{name}', exist_ok=True)
    open(f'{root}/data/npy-{name}/x.npy', 'wb').write(x)
    open(f'{root}/data/npy-{name}/y.npy', 'wb').write(y)
    if name != 'good':
        config(f'npy-{name}', lambda c, name=name: c['data'].update(source='npy', dir=f'../data/npy-{name}'), expect='.npy')
config('npy-source-misspelt', lambda c: c['data'].update(source='numpy', dir='../data/npy-good'), expect="'numpy'")
config('npy-setting-unknown', lambda c: c['data'].update(source='npy', dir='../data/npy-good', features='x.npy'),
       expect='data.features')
config('npy-test-half-given', lambda c: c['data'].update(source='npy', dir='../data/npy-good', test_x='x.npy'),
       expect='test_x and data.test_y come together')
# Command-line options.
for name, args, expect in [
    ('epochs-0', 'train configs/epochs-ok.json --out {out} --epochs 0', '--epochs'),
    ('seed-negative', 'train configs/epochs-ok.json --out {out} --seed -1', '--seed'),
    ('budget-nan', 'train configs/epochs-ok.json --out {out} --budget-minutes nan', '--budget-minutes'),
    ('threads-huge', 'train configs/epochs-ok.json --out {out} --threads 99999', '--threads'),
    ('labels-text', 'train configs/epochs-ok.json --out {out} --labels many', '--labels'),
    ('resume-without-checkpoint', 'train configs/epochs-ok.json --out {out} --resume', 'no checkpoint'),
    ('resume-from-missing', 'train configs/epochs-ok.json --out {out} --resume-from checkpoint-7.pens', 'checkpoint-7.pens'),
    ('memory-limit-negative', 'fmt models/../configs/mlp.model.json --memory-limit -1', '--memory-limit'),
    ('unknown-option', 'fmt configs/mlp.model.json --colour', '--colour'),
    ('gradcheck-tolerance-nan', 'gradcheck configs/mlp.model.json --tolerance nan', '--tolerance'),
    ('gradcheck-step-0', 'gradcheck configs/mlp.model.json --step 0', '--step'),
    ('gradcheck-sample-negative', 'gradcheck configs/mlp.model.json --sample -4', '--sample'),
    ('inspect-children-100', 'inspect configs/mlp.model.json --children 100', '--children'),
    ('inspect-batch-0', 'inspect configs/mlp.model.json --batch 0', '--batch'),
    ('new-mask-input-1.5', 'new mlp --mask-input 1.5', '--mask-input'),
    ('new-layers-0', 'new mlp --layers 784,0,10', '--layers'),
    ('new-layers-text', 'new mlp --layers 784,wide,10', '--layers'),
    ('new-penalty-unknown-kind', 'new mlp --penalty logits:cosine:1', 'cosine'),
    ('new-ctn-dim-0', 'new ctn --vocabulary 10 --dim 0', '--dim'),
    ('new-ctn-classes-3', 'new ctn --vocabulary 10 --classes 3', '--classes 3'),
    ('eval-batch-0', 'eval configs/trained.model.json --data-dir data/good --batch 0', '--batch'),
    ('eval-samples-negative', 'eval configs/trained.model.json --data-dir data/good --samples -3', '--samples'),
    ('eval-untrained', 'eval configs/mlp.model.json --data-dir data/good', 'no parameter values'),
    ('eval-small-images', 'eval configs/trained.model.json --data-dir data/small-images', '784'),
    ('eval-data-part', 'eval configs/trained.model.json --data-dir data/good --data validation', 'validation'),
    ]:
    case(f'cli/{name}', expect, args)
config('epochs-ok', None)
cases.pop()  # epochs-ok is the good config the CLI cases use, not a case
# Noise that no child draws (no pseudo_ensemble section): a valid file, refused for training.
dead = copy.deepcopy(mlp)
dead.pop('pseudo_ensemble')
json.dump(dead, open(f'{root}/configs/dead-noise.model.json', 'w'), indent=1)
config('noise-no-child-draws', lambda c: c.update(model='dead-noise.model.json'), expect='so no child draws it')
# Misspelt names: each answered with the name that was meant.
def named(d, name):
    for n in d['nodes']:
        if n['name'] == name: return n
    raise KeyError(name)
def rename_key(obj, old, new):
    obj[new] = obj.pop(old)
for name, change, expect in [
    ('op-misspelt', lambda d: named(d, 'a1').update(op='afine'), "did you mean 'affine'"),
    ('op-capitalised', lambda d: named(d, 'h1').update(op='Relu'), "did you mean 'relu'"),
    ('noise-kind-misspelt', lambda d: named(d, 'a1')['noise'][0].update(kind='gausian'), "did you mean 'gaussian'"),
    ('noise-kind-dropout', lambda d: named(d, 'h1')['noise'][0].update(kind='dropout'), "dropout is the kind 'mask'"),
    ('noise-attribute-std', lambda d: rename_key(named(d, 'a1')['noise'][0], 'sigma', 'std'), 'takes: sigma'),
    ('noise-attribute-prob', lambda d: rename_key(named(d, 'h1')['noise'][0], 'p', 'prob'), 'takes: p, rescale'),
    ('init-kind-misspelt', lambda d: node(d, 'W1')['init'].update(kind='norml'), "did you mean 'normal'"),
    ('op-attribute-misspelt', lambda d: rename_key(named(d, 'loss')['attrs'], 'axes', 'axis'), "did you mean 'axes'"),
    ('output-misspelt', lambda d: d.update(outputs=['logit']), "no node named 'logit' (did you mean 'logits'?"),
    ('node-input-misspelt', lambda d: named(d, 'logits').update(inputs=['h1', 'W3', 'b2']), "did you mean 'W1' or 'W2'"),
    ('penalty-node-misspelt', lambda d: d['pseudo_ensemble']['penalties'][0].update(node='h2'), "did you mean 'h1' or 'W2' or 'b2'"),
    ('penalty-kind-misspelt', lambda d: d['pseudo_ensemble']['penalties'][1].update(kind='kll'), "did you mean 'kl'"),
    ('penalty-kind-capitalised', lambda d: d['pseudo_ensemble']['penalties'][1].update(kind='KL'), "did you mean 'kl'"),
    ('node-field-misspelt', lambda d: rename_key(named(d, 'h1'), 'inputs', 'imputs'), "did you mean 'inputs'"),
    ('top-field-misspelt', lambda d: rename_key(d, 'outputs', 'output'), "did you mean 'outputs'"),
    ('ensemble-field-misspelt', lambda d: rename_key(d['pseudo_ensemble'], 'children', 'childs'), "did you mean 'children'"),
    ('parameter-field-misspelt', lambda d: rename_key(node(d, 'W2'), 'shape', 'shap'), "did you mean 'shape'"),
    ('loss-on-misspelt', lambda d: d['pseudo_ensemble'].update(loss_on='chlid'), "'parent', 'child' or 'children'"),
    ('pairing-underscore', lambda d: d['pseudo_ensemble'].update(pairing='parent_child'), "'child-child' or 'parent-child'"),
    ('rows-british', lambda d: d['pseudo_ensemble']['penalties'][0].update(rows='unlabelled'), "'all', 'labeled' or 'unlabeled'"),
    ('dtype-misspelt', lambda d: node(d, 'x').update(dtype='reel'), "'real' or 'index'"),
    ('flag-capitalised', lambda d: named(d, 'loss').update(flags=['Loss']), "unknown flag 'Loss'"),
    ('noise-attribute-of-another-kind', lambda d: named(d, 'h1')['noise'][0].update(sigma=0.1), 'takes: p, rescale'),
    ('init-field-misspelt', lambda d: node(d, 'W1')['init'].update(stdev=0.1), "did you mean 'std'"),
    ('penalty-parameter-misspelt', lambda d: d['pseudo_ensemble']['penalties'][0].update(params={'treshold': 0.5}), "no parameter 'treshold'"),
    ('top-field-short', lambda d: d.update(meta={}), "did you mean 'metadata'"),
    ('input-field-misspelt', lambda d: rename_key(node(d, 'x'), 'shape', 'shpe'), "did you mean 'shape'"),
    ('average-source-misspelt', lambda d: d.update(moving_averages=[{'param': 'W1', 'source': 'W3', 'decay': 0.9}]), "no node named 'W3' (did you mean 'W1' or 'W2'"),
    ('op-dashed', lambda d: named(d, 'losses').update(op='softmax-xent'), "did you mean 'softmax_xent'"),
    ('op-camel-case', lambda d: named(d, 'losses').update(op='SoftmaxXent'), "did you mean 'softmax_xent'"),
    ('tree-port-misspelt', lambda d: d.update(tree={'word': 'x'}), "did you mean 'words'"),
    ]:
    model(f'name-{name}', variant(change), expect=expect)
for name, change, expect in [
    ('section-misspelt', lambda c: c.update(evaluation={}), "did you mean 'eval'"),
    ('optimizer-field-misspelt', lambda c: c.update(optimizer={'learning_rte': 0.1}), "did you mean 'learning_rate'"),
    ('optimizer-kind-misspelt', lambda c: c.update(optimizer={'kind': 'adagard'}), "did you mean 'adagrad'"),
    ('optimizer-momentum', lambda c: c.update(optimizer={'momentum': 0.5}), "did you mean 'momentum_"),
    ('run-field-misspelt', lambda c: rename_key(c['run'], 'epochs', 'epoch'), "did you mean 'epochs'"),
    ('batch-field-british', lambda c: rename_key(c['batch'], 'labeled', 'labelled'), "did you mean 'labeled'"),
    ('data-field-long', lambda c: rename_key(c['data'], 'dir', 'directory'), "did you mean 'dir'"),
    ]:
    config(f'name-{name}', change, expect=expect)
for name, args, expect in [
    ('train-option-misspelt', 'train configs/epochs-ok.json --out {out} --epoch 3', "did you mean '--epochs'"),
    ('inspect-option-misspelt', 'inspect configs/mlp.model.json --fromat dot', "did you mean '--format'"),
    ('gradcheck-option-misspelt', 'gradcheck configs/mlp.model.json --tolerence 1e-3', "did you mean '--tolerance'"),
    ('gradcheck-op-misspelt', 'gradcheck --op relux', "did you mean 'relu'"),
    ('new-option-misspelt', 'new mlp --layer 784,10', "did you mean '--layers'"),
    ]:
    case(f'name/{name}', expect, args)
# Paths that cannot be used: the user's mistake, in one line, not an internal error.
os.makedirs(f'{root}/paths', exist_ok=True)
open(f'{root}/paths/a-file', 'w').write('a file where a folder should be\n')
for name, args, expect in [
    ('out-is-a-file', 'train configs/epochs-ok.json --out paths/a-file', 'Not a directory'),
    ('out-under-a-file', 'train configs/epochs-ok.json --out paths/a-file/run', 'Not a directory'),
    ('out-under-proc', 'train configs/epochs-ok.json --out /proc/pens-run', '/proc/pens-run'),
    ('data-dir-is-a-file', 'train configs/epochs-ok.json --out {out} --data-dir paths/a-file', 'paths/a-file'),
    ('init-missing', 'train configs/epochs-ok.json --out {out} --init paths/none.model.json', 'paths/none.model.json'),
    ('eval-missing-run', 'eval paths/no-run --data-dir data/good', 'paths/no-run'),
    ('eval-data-dir-is-a-file', 'eval configs/trained.model.json --data-dir paths/a-file', 'paths/a-file: not a folder'),
    ('init-is-a-folder', 'train configs/epochs-ok.json --out {out} --init configs', 'not a regular file'),
    ('resume-from-a-folder', 'train configs/epochs-ok.json --out {out} --resume-from configs', 'configs'),
    ('new-output-is-a-folder', 'new mlp --layers 784,10 --output configs', 'Is a directory'),
    ('inspect-a-folder', 'inspect configs', 'not a regular file'),
    ('config-is-a-folder', 'train paths', 'not a regular file'),
    ('config-is-not-json', 'train paths/a-file', 'not valid JSON'),
    ('new-output-under-a-file', 'new mlp --layers 784,10 --output paths/a-file/m.json', 'paths/a-file'),
    ]:
    case(f'path/{name}', expect, args)
# Trees.
def trees(name, text, expect):
    d = f'{root}/trees/{name}'
    os.makedirs(d, exist_ok=True)
    open(f'{d}/train.txt', 'wb').write(text)
    case(f'trees/{name}', expect, f'new ctn --sst trees/{name}')
ok = b'(3 (2 It) (4 (4 (2 works) (3 well)) (2 .)))\n'
trees('unbalanced-open', ok + b'(3 (2 a) (2 b)\n', 'train.txt:2:')
trees('unbalanced-close', ok + b'(3 (2 a) (2 b)))\n', 'train.txt:2:')
trees('label-7', ok + b'(7 (2 a) (2 b))\n', 'train.txt:2:')
trees('label-negative', ok + b'(-1 (2 a) (2 b))\n', 'train.txt:2:')
trees('three-children', b'(2 (2 a) (2 b) (2 c))\n', 'train.txt:1:')
trees('one-child', b'(2 (2 a))\n', 'train.txt:1:')
trees('empty-word', b'(2 (2 ) (2 b))\n', 'train.txt:1:')
trees('two-words', b'(2 (2 a b) (2 c))\n', 'train.txt:1:')
trees('two-trees-one-line', ok.strip() + b' ' + ok, 'train.txt:1:')
trees('blank-line', ok + b'\n' + ok, 'train.txt:2:')
trees('invalid-utf8', b'(2 (2 caf\xc3) (2 b))\n', 'train.txt:1:')
trees('nul-byte', b'(2 (2 a\x00) (2 b))\n', 'train.txt:1:')
trees('deep-nesting', b'(2 ' * 20000 + b'(2 a)' + b')' * 20000 + b'\n', 'train.txt:1:')
trees('empty-file', b'', 'train.txt')
trees('not-a-tree', b'hello world\n', 'train.txt:1:')
with open(f'{root}/cases.tsv', 'w') as f:
    f.write('# name\texpected in the message (- for nothing)\tpens arguments (run in this folder; {out} is a fresh output folder)\n')
    for name, expect, args in cases: f.write('\t'.join([name, expect or '-', args]) + '\n')
print(len(cases), 'cases')
