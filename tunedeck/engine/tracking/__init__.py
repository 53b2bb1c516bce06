"""Experiment trackers a job reports to (its `report_to` key): MLflow, TensorBoard, Weights & Biases, trackio.

One module per tracker behind the `Tracker` protocol (`tunedeck.engine.tracking.protocol`); the
`TrackerFanOut` (`fanout`) calls them all and guards every call, so a tracker never fails a job;
`ReportingEventWriter` (`reporting_events`) feeds them from the run's own events, so what a tracker
shows is what the job page shows (metrics, evaluations, baseline and final evaluation). Each tracker's
library is imported only when a job asks for it (`make install-trackers` installs them).
"""
