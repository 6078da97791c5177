"""
Watching a fit: verbose and callback
====================================

``verbose=1`` prints a line when the training programs compile and one per
epoch, with its time and an estimate of the time left.  ``callback``
receives an :class:`skdiagatt.EpochInfo` after every epoch -- to draw the
loss curve in a notebook, log it, or stop the fit: a true return value ends
the phase, as early stopping would.
"""

# %%
# Progress lines
# --------------
import time

import matplotlib.pyplot as plt

from skdiagatt import DiagAttRegressor
from skdiagatt.datasets import make_individualized_regression

X, y, rows, truth = make_individualized_regression(400, n_rows=(5, 30), n_features=10, random_state=0)
# max_iter="auto" (the default) sets the epochs from the data and tol; a looser
# tol than the default 1e-4 ends this fit in about 25 epochs.
DiagAttRegressor(tol=1e-3, calibration_iter=2, random_state=0, verbose=1).fit(X, y)

# %%
# A callback that records the epochs and stops on a time budget
# -------------------------------------------------------------
# Here the budget is generous; a real one would cut a long fit short.  The
# calibration phase still runs after a stop: it makes the prediction usable.
history = []
deadline = time.perf_counter() + 60.0


def watch(info):
    history.append(info)
    return time.perf_counter() > deadline  # True: stop this phase now


est = DiagAttRegressor(max_iter=30, early_stopping=True, random_state=0, callback=watch).fit(X, y)
main = [i for i in history if i.phase == "main"]  # the names of est.loss_curve_phase_
print(f"{len(main)} epochs of the main phase, the last one {main[-1].seconds * 1e3:.1f} ms")

# %%
# The recorded losses
# -------------------
fig, ax = plt.subplots(figsize=(6, 3))
ax.plot([i.epoch for i in main], [i.train_loss for i in main], label="training")
ax.plot([i.epoch for i in main], [i.valid_loss for i in main], ":", label="validation")
ax.set_xlabel("epoch")
ax.set_ylabel("objective of the main phase")
ax.legend()
plt.show()
