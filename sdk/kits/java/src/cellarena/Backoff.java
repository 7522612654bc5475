package cellarena;

import java.util.Random;
import java.util.regex.Matcher;
import java.util.regex.Pattern;

/**
 * The wait after the n-th failure in a row: a random time between half and all of min(60, 2^(n-1))
 * seconds, and at least what a {@code locked_out} message names ("refused for another 42 s"). The
 * randomness keeps bots turned away at once (a ladder restarting) from all coming back at once.
 */
public final class Backoff {
    private static final Pattern HINT = Pattern.compile("for (?:another )?(\\d+(?:\\.\\d+)?) ?s\\b");
    private final double first, cap;
    private final Random random;
    private int failures;

    public Backoff(double first, double cap, Random random) {
        this.first = first;
        this.cap = cap;
        this.random = random;
    }

    public Backoff() {
        this(1.0, 60.0, new Random());
    }

    public double next(String serverMessage) {
        failures++;
        double ceiling = Math.min(cap, first * Math.pow(2, Math.min(failures - 1, 32)));
        double wait = ceiling / 2 + random.nextDouble() * ceiling / 2;
        Matcher m = HINT.matcher(serverMessage == null ? "" : serverMessage);
        if (m.find()) wait = Math.max(wait, Double.parseDouble(m.group(1)) + random.nextDouble());
        return wait;
    }

    public void reset() {
        failures = 0;
    }
}
