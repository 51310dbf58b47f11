// viewer_test_main.cpp — GoogleTest's main for hs_viewer_tests, inside a QApplication on the
// offscreen platform (CTest also sets QT_QPA_PLATFORM=offscreen), with QSettings kept in a
// scratch directory so that tests never read or write the user's recent files.
#include <gtest/gtest.h>

#include <QApplication>
#include <QTemporaryDir>

int main(int argc, char** argv) {
  if (qEnvironmentVariableIsEmpty("QT_QPA_PLATFORM")) qputenv("QT_QPA_PLATFORM", "offscreen");
  QTemporaryDir config_home;
  qputenv("XDG_CONFIG_HOME", config_home.path().toUtf8());
  QApplication app(argc, argv);
  QApplication::setOrganizationName(QStringLiteral("hybridscope-tests"));
  QApplication::setApplicationName(QStringLiteral("viewer-tests"));
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
