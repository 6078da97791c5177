"""
Your own matrices: fit, predict, localize
=========================================

Each sample is a matrix you already have: the embeddings of a text's
tokens, of an image's patches, of the instances of a bag.  The number of
rows may differ from sample to sample; the number of features may not.
Here the "embeddings" are simulated so that the answer is known: in every
sample one row, at a different place each time, carries the response.
"""

# %%
# The data: a list of (p_i, d) arrays and one response per sample
# ----------------------------------------------------------------
import matplotlib.pyplot as plt
import numpy as np

from skdiagatt import DiagAttRegressor
from skdiagatt.plotting import plot_history, plot_tokens

rng = np.random.default_rng(0)
d, beta = 8, np.linspace(1.0, -1.0, 8)
marker = np.zeros(d)
marker[0] = 3.0  # the informative row stands out along one direction

X, y, true_rows = [], [], []
for _ in range(400):
    p = rng.integers(5, 25)  # 5 to 24 rows
    x = rng.normal(size=(p, d))
    j = rng.integers(p)  # which row carries the response
    x[j] += marker
    X.append(x)
    y.append(x[j] @ beta + 0.1 * rng.normal())
    true_rows.append(j)
y = np.array(y)
print(len(X), "samples;", [x.shape for x in X[:3]], "...")

# %%
# Fit and predict
# ---------------
# ``fit`` takes the list as it is: no padding, no fixed length.
train, test = slice(0, 300), slice(300, None)
est = DiagAttRegressor(random_state=0).fit(X[train], y[train])
pred = est.predict(X[test])
print(f"test R^2: {est.score(X[test], y[test]):.3f}")

# %%
# Localize: which row drove each prediction
# -----------------------------------------
# ``localize`` returns, per sample, the row each head chose; ``attention``
# the weights of every row.
found = est.localize(X[test])
hits = np.mean([f[0] == t for f, t in zip(found, true_rows[300:])])
print(f"the chosen row is the informative one in {hits:.0%} of the test samples")

# %%
# A picture of the weights
# ------------------------
# Rows as tokens: shade = attention weight, box = the chosen row.
samples = X[300:304]
weights = est.attention(samples)
ax = plot_tokens([[f"row{j}" for j in range(len(x))] for x in samples], weights,
                 [f[:1] for f in found[:4]],
                 labels=[f"informative row {t}, predicted {v:.2f}" for t, v in zip(true_rows[300:304], pred)])
ax.set_title("attention weight per row (box: chosen row)")

# %%
# The training history: the per-epoch objective of both training phases.
fig, ax = plt.subplots(figsize=(6, 3))
plot_history(est, ax=ax)
plt.show()
