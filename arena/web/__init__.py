"""Tournament pages for the browser viewer (`cellarena web RUNS_DIR`).

The pages read a `ResultsSource` (standings, matches, rating history, replay files): a tournament's
results database gives one (`results.TournamentResults`); the public ladder can give another over its
own store and mount the same routes (`pages.results_routes`) next to the replay player.
"""
