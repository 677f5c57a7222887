// Starts Amazon DynamoDB Local bound to 127.0.0.1 only.
//
// The stock launcher (DynamoDBLocal.jar) has no bind-address option and its
// Jetty server listens on every interface. This launcher builds the server the
// same way the stock one does (same command-line flags), then sets the host of
// its Jetty connectors to 127.0.0.1 before starting it. Run it as a Java
// single-file program: java -cp "<jar>:<lib>/*" DynamoDbLocalLoopback.java -port 8000 ...
//
// It also exits when its standard input ends: the process that started it
// holds the other end of that pipe, so DynamoDB Local never outlives it,
// however it ends, on macOS as on Linux.
import java.io.IOException;
import java.lang.reflect.Field;

import org.eclipse.jetty.server.Connector;
import org.eclipse.jetty.server.Server;
import org.eclipse.jetty.server.ServerConnector;
import software.amazon.dynamodb.services.local.main.ServerRunner;
import software.amazon.dynamodb.services.local.server.DynamoDBProxyServer;

public class DynamoDbLocalLoopback {
    public static void main(String[] args) throws Exception {
        DynamoDBProxyServer proxy = ServerRunner.createServerFromCommandLineArgs(args);
        Field field = DynamoDBProxyServer.class.getDeclaredField("server");
        field.setAccessible(true);
        Server jetty = (Server) field.get(proxy);
        int bound = 0;
        for (Connector connector : jetty.getConnectors()) {
            if (connector instanceof ServerConnector serverConnector) {
                serverConnector.setHost("127.0.0.1");
                bound++;
            }
        }
        if (bound == 0) {
            throw new IllegalStateException("no Jetty connector found to bind to 127.0.0.1");
        }
        Thread starterGone = new Thread(() -> {
            try {
                while (System.in.read() != -1) {
                }
            } catch (IOException ended) {
            }
            System.exit(0);
        });
        starterGone.setDaemon(true);
        starterGone.start();
        proxy.start();
        System.out.println("DynamoDB Local listening on 127.0.0.1 only");
        proxy.join();
    }
}
